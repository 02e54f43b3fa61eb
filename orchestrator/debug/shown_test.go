package debug

import (
	"strings"
	"testing"

	"github.com/google/go-dap"

	"github.com/berth-dev/berth/enclosure/host/hosttest"
	"github.com/berth-dev/berth/orchestrator/metrics"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// What the adapter and the program print names the workdir as the
// container sees it ("Building /workspace/internal/demo"); the answer
// shows it relative, as every other path (issue 24 item 16), and with the
// program's escape sequences and carriage returns escaped (item 6). A
// frame's path with a newline in it is quoted and its name keeps to its
// line.
func TestDebugOutputShowsWorkdirPathsRelativeAndEscaped(t *testing.T) {
	cfg := DefaultConfig()
	m := hosttest.NewMapped(t, t.TempDir())
	root, err := workspace.NewWith(m.Workdir, workspace.Options{View: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	s := newSession(&cfg, &cfg.Adapters[0], metrics.NewForTest(), paths{root: root, toAdapter: m.MapPath, toHost: m.HostPath}, "main.go")
	s.onEvent(&dap.OutputEvent{Body: dap.OutputEventBody{Category: "console", Output: "Building " + m.View + "/internal/demo\n"}})
	s.onEvent(&dap.OutputEvent{Body: dap.OutputEventBody{Category: "stdout", Output: "wrote " + m.View + "/out.txt\x1b[2J\rgone\n"}})
	p := &Provider{}
	out := p.output(&conversation{sess: s})
	if !strings.Contains(out, `wrote out.txt\x1b[2J\rgone`) || strings.Contains(out, m.View) || strings.ContainsAny(out, "\x1b\r") {
		t.Errorf("output = %q: want the workdir's path relative and the control characters escaped", out)
	}
	said := s.adapterSaid()
	if !strings.Contains(said, "Building internal/demo") || strings.Contains(said, m.View) {
		t.Errorf("the adapter's output = %q: want \"Building internal/demo\"", said)
	}
	app := m.Workdir + "/app.py"
	s.state.bps[app] = []breakpoint{{requested: 3, Breakpoint: dap.Breakpoint{Line: 3, Message: "could not find file " + m.View + "/app.py"}}}
	if got := s.state.breakpointText(s.paths, app); !strings.Contains(got, "unverified: could not find file app.py") {
		t.Errorf("an unverified breakpoint's message = %q: want the adapter's path relative", got)
	}
	loc := s.paths.location(m.View+"/a.go\n/etc/passwd", 1, "main\n/etc/passwd:1", "")
	for _, line := range strings.Split(loc, "\n") {
		if strings.HasPrefix(line, "/etc/passwd") {
			t.Errorf("location %q has a line forged by the adapter: %q", loc, line)
		}
	}
	if !strings.HasPrefix(loc, `"a.go\n/etc/passwd":1 in main\n/etc/passwd:1`) {
		t.Errorf("location = %q: want the path relative and quoted, the name escaped", loc)
	}
}
