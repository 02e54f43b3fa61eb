package debug

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// Breakpoints stored in files of several languages go to each adapter
// only for its own languages' files, and the launch's answer names the
// ones held back: lldb does not list a Python file's as unverified,
// debugpy does not call a C file's verified, and delve is not sent a C
// file it cannot find. A breakpoint set during a session in another
// language's file is stored, not sent (issue 24 item 9).
func TestBreakpointsGoOnlyToTheirLanguagesAdapter(t *testing.T) {
	e := newEnv(t, "", nil)
	for fixture, sub := range map[string]string{"python": "pyproj", "golang": "goproj", "c": "cproj"} {
		if err := os.CopyFS(filepath.Join(e.dir, sub), os.DirFS(filepath.Join("testdata", fixture))); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("gcc", "-g", "-O0", "-o", filepath.Join(e.dir, "cproj", "prog"), filepath.Join(e.dir, "cproj", "prog.c")).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	e.ok(`{"operation":"breakpoints","file":"pyproj/app.py","lines":[13]}`, "stored 1 breakpoint")
	e.ok(`{"operation":"breakpoints","file":"goproj/main.go","lines":[22]}`, "stored 1 breakpoint")
	e.ok(`{"operation":"breakpoints","file":"cproj/prog.c","lines":[17]}`, "stored 1 breakpoint")

	answered := func(text, bp string) bool {
		return regexp.MustCompile(regexp.QuoteMeta(bp) + ` (\(moved[^)]*\) )?(verified|unverified)`).MatchString(text)
	}
	for _, c := range []struct {
		program, adapter, own string
		others                []string
	}{
		{"cproj/prog", "lldb", "cproj/prog.c:17", []string{"goproj/main.go:22", "pyproj/app.py:13"}},
		{"pyproj/app.py", "debugpy", "pyproj/app.py:13", []string{"cproj/prog.c:17", "goproj/main.go:22"}},
		{"goproj", "delve", "goproj/main.go:22", []string{"cproj/prog.c:17", "pyproj/app.py:13"}},
	} {
		out := e.ok(`{"operation":"launch","program":"`+c.program+`"}`, "launched "+c.program+" with "+c.adapter, c.own+" verified", "stopped (breakpoint)",
			"held back, not "+c.adapter+"'s languages (a launch of a program in their language sets them): "+c.others[0]+", "+c.others[1])
		for _, o := range c.others {
			if answered(out, o) {
				t.Errorf("%s was sent %s:\n%s", c.adapter, o, out)
			}
		}
		if c.adapter == "delve" {
			// During the session: stored for later, not sent.
			out := e.ok(`{"operation":"breakpoints","file":"cproj/prog.c","lines":[5,17]}`,
				"stored 2 breakpoints in cproj/prog.c; not sent to the running delve session, which does not debug .c files: a launch of a program in their language sets them")
			if answered(out, "cproj/prog.c:5") {
				t.Errorf("delve was sent cproj/prog.c:5:\n%s", out)
			}
		}
		e.ok(`{"operation":"continue"}`, "the program ended (exit code 0)")
	}
	noProcess(t, e.dir)
}
