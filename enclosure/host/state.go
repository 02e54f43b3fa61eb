package host

import (
	"os"
	"slices"
	"strings"
	"sync"

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

// childEnv is Berth's environment without the variables no child may
// see (SecretEnv, and drop: Options.Drop), then extra (a Cmd's own Env, which its caller sets on purpose).
func childEnv(drop, extra []string) []string {
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
