package debug

import (
	"strings"
	"testing"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/host/hosttest"
)

// debugpy in an enclosure that sees the workdir at another path, as a
// container sees it at its mount: the adapter runs there and is given only
// that path (program, cwd, breakpoints), and the frames and breakpoints it
// reports come back as workdir-relative paths with their source lines
// (issue 13 item 4).
func TestDebugpyThroughAMappedWorkdir(t *testing.T) {
	var m *hosttest.Mapped
	e := newEnvIn(t, "python", nil, func(dir string) enclosure.Enclosure {
		m = hosttest.NewMapped(t, dir)
		return m
	})
	var shown []string
	ok := func(args string, want ...string) string {
		text := e.ok(args, want...)
		shown = append(shown, text)
		return text
	}
	ok(`{"operation":"breakpoints","file":"app.py","lines":[13]}`, "stored 1 breakpoint", "app.py:13")
	ok(`{"operation":"launch","program":"app.py","args":[]}`,
		"launched app.py with debugpy", "app.py:13 verified", "13 | total = square(7)", "stopped (breakpoint)", "app.py:13 in main")
	ok(`{"operation":"stack"}`, "#0 frame_id", "app.py:13 in main", "13 | total = square(7)", "app.py:20 in <module>")
	ok(`{"operation":"step_in"}`, "stopped (step)", "app.py:5 in square", "5 | result = n * n")
	ok(`{"operation":"breakpoints","file":"app.py","lines":[6]}`, "app.py:6 verified", "6 | return result")
	ok(`{"operation":"continue"}`, "app.py:6 in square")
	ok(`{"operation":"continue"}`, "the session ended: the program ended (exit code 0)")
	noProcess(t, e.dir)

	for _, s := range shown {
		if strings.Contains(s, m.View) || strings.Contains(s, e.dir) {
			t.Errorf("an answer names an absolute workdir path instead of a relative one:\n%s", s)
		}
	}
	sent := m.Stdin()
	for _, want := range []string{`"program":"` + m.View + `/app.py"`, `"cwd":"` + m.View + `"`, `"path":"` + m.View + `/app.py"`} {
		if !strings.Contains(sent, want) {
			t.Errorf("debugpy was not given %s:\n%.3000s", want, sent)
		}
	}
	if strings.Contains(sent, e.dir) {
		t.Errorf("debugpy was given a host path (%s):\n%.3000s", e.dir, sent)
	}
	for _, c := range m.Cmds() {
		if c.Dir != m.View {
			t.Errorf("%s %v started in %q, want the mapped workdir %q", c.Path, c.Args, c.Dir, m.View)
		}
	}
}
