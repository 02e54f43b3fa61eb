package e2e

import (
	"encoding/json"
	"maps"
	"testing"

	"github.com/berth-dev/berth/orchestrator/rpc"
)

// family is one tool family's end-to-end checks, written once and run in
// any place: TestLSPThroughTheProtocol runs lspGo on the host,
// TestContainersDockerLSPGo in a berth/lsp:dev container, and
// TestContainersDockerEveryFamilyInOneContainer every family in one berth/full container.
type family struct {
	name string
	// config holds the configuration's top-level sections the checks
	// need (kernels, debug, vibe), merged when families share a binary.
	config map[string]any
	// check fills the site's workdir, starts its runs with s.start and
	// checks the tools' answers and that run/stop leaves no process.
	check func(t *testing.T, c *rpc.Client, s *site)
}

// runFamily runs f in a fresh site of p, with a binary of its own.
func runFamily(t *testing.T, p place, f family) {
	t.Helper()
	s := p.fresh(t)
	f.check(t, startFamilies(t, f), s)
}

// startFamilies starts the binary with the families' configuration.
func startFamilies(t *testing.T, fs ...family) *rpc.Client {
	t.Helper()
	cfg := map[string]any{}
	for _, f := range fs {
		maps.Copy(cfg, f.config)
	}
	if len(cfg) == 0 {
		return startStdio(t)
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return startWithConfig(t, string(b)) // YAML reads JSON
}
