package host

import (
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/berth-dev/berth/enclosure/relay"
)

// relayState is the relay the enclosure found, looked for once, at the
// first start.
type relayState struct {
	once sync.Once
	path string // "" when there is none
}

// relayPath is the relay's path, or "" when there is none: then processes
// run without it, and a warning says once what that costs and how to
// install it. The host still works, as the README's first command
// (go run, whose executable sits in a temporary directory) needs.
func (e *Enclosure) relayPath() string {
	e.relay.once.Do(func() {
		b, err := e.opts.Relay()
		if err != nil {
			e.opts.Log.Warn("host processes run without "+relay.Name+", so a kill -9 of Berth can leave the processes they started running", "err", err)
			return
		}
		e.relay.path = b.Path
	})
	return e.relay.path
}

// SecretEnv names the variables of Berth's own environment that no
// process it starts inherits, whatever the configuration: the bearer
// token of the protocol's WebSocket.
var SecretEnv = []string{"BERTH_TOKEN"}

// dropped holds the names env.drop adds to SecretEnv.
var dropped atomic.Pointer[[]string]

// DropEnv names the variables of Berth's environment, besides SecretEnv,
// that the processes it starts on the host (language servers, kernels,
// debug adapters and their programs, workers) do not inherit: the
// env.drop configuration key. Each call replaces the names of the last.
func DropEnv(names []string) {
	names = slices.Clone(names)
	dropped.Store(&names)
}

// childEnv is Berth's environment without the variables no child may
// see, then extra (a Cmd's own Env, which its caller sets on purpose).
func childEnv(extra []string) []string {
	var drop []string
	if p := dropped.Load(); p != nil {
		drop = *p
	}
	env := os.Environ()
	out := make([]string, 0, len(env)+len(extra))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(SecretEnv, name) && !slices.Contains(drop, name) {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}
