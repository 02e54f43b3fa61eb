package e2e

import (
	"path/filepath"
	"regexp"
	"testing"
)

// A containerd container (berth/full) whose workdir holds a Go, a C and
// a Python project, with breakpoints stored in each: every adapter (dlv,
// lldb-dap, debugpy, each running in the container) is sent only its
// own language's, and the launch names the others as held back. Under
// containerd, delve was sent the C file and answered "could not find
// file /workspace/cproj/prog.c" (issue 24 item 9).
func TestContainersDebugBreakpointsGoOnlyToTheirAdapter(t *testing.T) {
	s := inContainerd(t, fullImage).fresh(t)
	for fixture, sub := range map[string]string{"golang": "goproj", "c": "cproj", "python": "pyproj"} {
		copyTree(t, filepath.Join("..", "orchestrator", "debug", "testdata", fixture), filepath.Join(s.Dir, sub))
	}
	s.run(t, "gcc", "-g", "-O0", "-o", "cproj/prog", "cproj/prog.c")
	c := startFamilies(t, containerdSection, family{config: debugSection})
	run := s.start(t, c, nil)
	for file, line := range map[string]int{"goproj/main.go": 22, "cproj/prog.c": 17, "pyproj/app.py": 13} {
		debugCall(t, c, run, map[string]any{"operation": "breakpoints", "file": file, "lines": []int{line}}, "stored 1 breakpoint")
	}
	answered := regexp.MustCompile(`(?m)^(\S+:\d+) (\(moved[^)]*\) )?(verified|unverified)`)
	for _, l := range []struct {
		program, adapter, own, held string
	}{
		{"goproj", "delve", "goproj/main.go:22", "cproj/prog.c:17, pyproj/app.py:13"},
		{"cproj/prog", "lldb", "cproj/prog.c:17", "goproj/main.go:22, pyproj/app.py:13"},
		{"pyproj/app.py", "debugpy", "pyproj/app.py:13", "cproj/prog.c:17, goproj/main.go:22"},
	} {
		out := debugCall(t, c, run, map[string]any{"operation": "launch", "program": l.program},
			"launched "+l.program+" with "+l.adapter, l.own+" verified", "stopped (breakpoint)",
			"held back, not "+l.adapter+"'s languages (a launch of a program in their language sets them): "+l.held)
		for _, m := range answered.FindAllStringSubmatch(out, -1) {
			if m[1] != l.own {
				t.Errorf("%s was sent %s:\n%s", l.adapter, m[1], out)
			}
		}
		if regexp.MustCompile(`could not find file|/workspace/`).MatchString(out) {
			t.Errorf("%s's launch speaks of a file it could not find, or of a container path:\n%s", l.adapter, out)
		}
		debugCall(t, c, run, map[string]any{"operation": "continue"}, "the program ended (exit code 0)")
	}
	if err := c.StopRun(testCtx(t), run); err != nil {
		t.Fatal(err)
	}
	s.waitNoProcesses(t, "run/stop")
}
