package debug

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// TestLLDBTranscript drives a real lldb-dap on a C program built with gcc
// -g in the test.
func TestLLDBTranscript(t *testing.T) {
	e := newEnv(t, "c", nil)
	if out, err := exec.Command("gcc", "-g", "-O0", "-o", filepath.Join(e.dir, "prog"), filepath.Join(e.dir, "prog.c")).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	e.ok(`{"operation":"breakpoints","file":"prog.c","lines":[17]}`, "stored 1 breakpoint", "17 | int total = square(7);")
	e.ok(`{"operation":"launch","program":"prog"}`,
		"launched prog with lldb", "prog.c:17 verified", "stopped (breakpoint)", "prog.c:17", "17 | int total = square(7);")
	st := e.ok(`{"operation":"stack"}`, "#0 frame_id", "prog.c:17 in main")
	sc := e.ok(`{"operation":"scopes","frame_id":`+after(t, st, "frame_id ")+`}`, "Locals: reference")
	locals := e.ok(`{"operation":"variables","reference":`+after(t, sc, "Locals: reference ")+`}`, "name (const char *)", "berth",
		"text (char[10001]) = \"xxx", "(cut: showing 400 of") // lldb-dap sends ~1024 of the 10000 characters; Berth cuts that
	e.ok(`{"operation":"variables","reference":`+reference(t, locals, "items ")+`}`, "(showing 50 of 500)", "[0] (int) = 0", "[49] (int) = 49")
	e.ok(`{"operation":"step_in"}`, "prog.c:5 in square", "5 | int result = n * n;")
	e.ok(`{"operation":"step_over"}`, "prog.c:6 in square")
	e.ok(`{"operation":"evaluate","expression":"result + 1"}`, "50")
	e.ok(`{"operation":"step_out"}`, "prog.c:17 in main")
	e.ok(`{"operation":"continue"}`, "the session ended: the program ended (exit code 0)")
	e.ok(`{"operation":"output"}`, "total 49 berth 10000")
	noProcess(t, e.dir)
}
