package host

import (
	"os"
	"slices"
	"strings"
	"sync/atomic"
)

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
