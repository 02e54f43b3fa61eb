package debug

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-dap"

	"github.com/berth-dev/berth/orchestrator/metrics"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// A breakpoint event updates the stored answer by breakpoint id.
func TestBreakpointEventUpdates(t *testing.T) {
	cfg := DefaultConfig()
	root, err := workspace.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	app := filepath.Join(root.Dir(), "app.py")
	s := newSession(&cfg, &cfg.Adapters[0], metrics.NewForTest(), paths{root: root}, "app.py")
	s.state.bps[app] = []breakpoint{{requested: 3, Breakpoint: dap.Breakpoint{Id: 7, Line: 3, Message: "pending"}}}
	if got := s.state.breakpointText(s.paths, app); got != "app.py:3 unverified: pending" {
		t.Fatalf("before the event: %q", got)
	}
	s.onEvent(&dap.BreakpointEvent{Body: dap.BreakpointEventBody{Reason: "changed", Breakpoint: dap.Breakpoint{Id: 7, Verified: true, Line: 4}}})
	if got := s.state.breakpointText(s.paths, app); got != "app.py:3 (moved by the adapter to line 4, the nearest with code) verified" {
		t.Fatalf("after the event: %q", got)
	}
	s.onEvent(&dap.BreakpointEvent{Body: dap.BreakpointEventBody{Reason: "removed", Breakpoint: dap.Breakpoint{Id: 7}}})
	if got := s.state.breakpointText(s.paths, app); got != "" {
		t.Fatalf("after removal: %q", got)
	}
}

// A breakpoint set through a symlink is set on the file it points to.
func TestBreakpointThroughSymlink(t *testing.T) {
	e := newEnv(t, "python", nil)
	if err := os.Symlink("app.py", e.dir+"/link.py"); err != nil {
		t.Fatal(err)
	}
	e.ok(`{"operation":"breakpoints","file":"link.py","lines":[13]}`, "stored 1 breakpoint in app.py")
	e.ok(`{"operation":"launch","program":"app.py"}`, "app.py:13 verified", "stopped (breakpoint)", "app.py:13 in main")
	e.ok(`{"operation":"terminate"}`)
}
