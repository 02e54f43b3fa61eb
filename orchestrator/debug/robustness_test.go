package debug

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/errclass"
	"github.com/berth-dev/berth/internal/procfs"
	"github.com/berth-dev/berth/orchestrator/metrics"

	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/orchestrator"
)

// callAs sends one debug call from run and returns its result.
func (e *env) callAs(run *orchestrator.Run, args string) *orchestrator.Result {
	e.t.Helper()
	res, err := e.reg.Call(e.t.Context(), run, orchestrator.SurfaceFull, "debug", []byte(args))
	if err != nil {
		e.t.Fatalf("debug %s from %s: Go error %v", args, run.ID, err)
	}
	e.t.Logf(">> (%s) debug %s\n<< error=%v %s", run.ID, args, res.IsError, res.FirstText())
	return res
}

// Issue 11 item 4: a run of another connection that reuses the
// conversation id can neither read nor drive the session; a run of the
// launching connection (a subagent's) shares it.
func TestSessionBelongsToItsConnection(t *testing.T) {
	e := newEnv(t, "python", quickStops)
	connA, connB := new(int), new(int)
	e.run.Owner = connA
	e.ok(`{"operation":"breakpoints","file":"serve.py","lines":[5]}`)
	e.ok(`{"operation":"launch","program":"serve.py"}`, "launched serve.py with debugpy", "stopped (breakpoint)")

	sub := orchestrator.NewRun("run-sub", "conv-1", e.dir, host.New(), nil, nil)
	sub.Owner = connA
	defer sub.End("test over")
	if res := e.callAs(sub, `{"operation":"evaluate","expression":"count"}`); res.IsError {
		t.Fatalf("a run of the launching connection could not evaluate: %s", res.FirstText())
	}

	other := orchestrator.NewRun("run-other", "conv-1", e.dir, host.New(), nil, nil)
	other.Owner = connB
	defer other.End("test over")
	for _, op := range []string{
		`{"operation":"status"}`,
		`{"operation":"evaluate","expression":"count"}`,
		`{"operation":"stack"}`,
		`{"operation":"output"}`,
		`{"operation":"breakpoints","file":"serve.py","lines":[]}`,
		`{"operation":"launch","program":"app.py"}`,
		`{"operation":"terminate"}`,
	} {
		res := e.callAs(other, op)
		if !res.IsError {
			t.Fatalf("debug %s from another connection succeeded: %s", op, res.FirstText())
		}
		has(t, res.FirstText(), "a debug session of this conversation belongs to another connection")
		// Issue 27 item 3: a clash with the state, of class conflict.
		if res.ErrorClass != errclass.Conflict || strings.HasSuffix(res.FirstText(), "conflict") {
			t.Errorf("debug %s from another connection: errorClass %q, text %q; want conflict, not said in the text", op, res.ErrorClass, res.FirstText())
		}
	}
	// Detection touches nothing of the conversation.
	if res := e.callAs(other, `{"operation":"adapters"}`); res.IsError {
		t.Fatalf("adapters from another connection: %s", res.FirstText())
	}
	e.ok(`{"operation":"status"}`, "debugpy debugging serve.py", "stopped (breakpoint)")

	// Once the launching connection's runs are gone, the conversation id
	// is free again, with nothing of theirs left in it.
	e.run.End("test over")
	sub.End("test over")
	noProcess(t, e.dir)
	res := e.callAs(other, `{"operation":"status"}`)
	if res.IsError {
		t.Fatalf("status after the owner left: %s", res.FirstText())
	}
	has(t, res.FirstText(), "no debug session is running in this conversation")
	if text := res.FirstText(); strings.Contains(text, "serve.py") || strings.Contains(text, "stored breakpoints") {
		t.Fatalf("the next connection sees the last one's session or breakpoints:\n%s", text)
	}
}

// Issue 11 item 8: a Berth killed with -9 leaves the binaries delve built
// for it in the temporary directory; the next Berth's start removes them,
// and only them.
func TestStaleBuiltBinariesAreSweptAtStart(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)

	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	deadPID := gone.Process.Pid
	if procfs.Alive(deadPID) {
		t.Fatalf("pid %d was reused at once", deadPID)
	}
	cfg := DefaultConfig()
	maxAge := cfg.SessionTTL + cfg.BuildWait
	old := time.Now().Add(-maxAge - time.Minute)
	files := []struct {
		name  string
		old   bool
		swept bool
	}{
		{fmt.Sprintf("berth-debug-%d-0a1b2c", deadPID), false, true},      // its Berth is gone
		{fmt.Sprintf("berth-debug-%d-0a1b2c", os.Getpid()), false, false}, // a live Berth's
		{fmt.Sprintf("berth-debug-%d-3d4e5f", os.Getpid()), true, true},   // older than any session
		{"berth-debug-0a1b2c3d4e5f", false, false},                        // a pid-less name: by age only
		{"berth-debug-6a7b8c9d0e1f", true, true},
		{"unrelated-file", true, false},
	}
	for _, f := range files {
		path := filepath.Join(tmp, f.name)
		if err := os.WriteFile(path, []byte("ELF"), 0o755); err != nil {
			t.Fatal(err)
		}
		if f.old {
			if err := os.Chtimes(path, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Mkdir(filepath.Join(tmp, fmt.Sprintf("berth-debug-%d-dir", deadPID)), 0o755); err != nil {
		t.Fatal(err)
	}

	if _, err := New(cfg, metrics.NewForTest()); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		_, err := os.Stat(filepath.Join(tmp, f.name))
		if kept := err == nil; kept == f.swept {
			t.Errorf("%s: kept=%v, want swept=%v", f.name, kept, f.swept)
		}
	}
	if _, err := os.Stat(filepath.Join(tmp, fmt.Sprintf("berth-debug-%d-dir", deadPID))); err != nil {
		t.Errorf("a directory was removed: %v", err)
	}
}

// Issue 11 item 8: the binary delve builds for a launch carries the pid
// of the Berth that asked for it, which the sweep reads.
func TestBuiltBinaryIsNamedWithBerthsPID(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	e := newEnv(t, "golang", nil)
	e.ok(`{"operation":"breakpoints","file":"main.go","lines":[22]}`)
	e.ok(`{"operation":"launch","program":"."}`, "stopped (breakpoint)")
	matches, _ := filepath.Glob(filepath.Join(tmp, fmt.Sprintf("berth-debug-%d-*", os.Getpid())))
	if len(matches) != 1 {
		entries, _ := os.ReadDir(tmp)
		t.Fatalf("want one berth-debug-%d-* binary in %s, found %v (all: %v)", os.Getpid(), tmp, matches, entries)
	}
	e.ok(`{"operation":"terminate"}`)
	noProcess(t, e.dir)
	if _, err := os.Stat(matches[0]); !os.IsNotExist(err) {
		t.Fatalf("%s outlived its session: %v", matches[0], err)
	}
}

// Issue 11 item 11a: a Go program in a module below the working
// directory is built from that module's root, not from the working
// directory (where go build finds no go.mod).
func TestGoProgramInANestedModuleIsBuiltFromItsRoot(t *testing.T) {
	e := newEnv(t, "gonested", nil)
	e.ok(`{"operation":"breakpoints","file":"svc/cmd/app/main.go","lines":[11]}`)
	e.ok(`{"operation":"launch","program":"svc/cmd/app"}`, "launched svc/cmd/app with delve", "stopped (breakpoint)", "svc/cmd/app/main.go:11 in main.main")
	e.ok(`{"operation":"evaluate","expression":"msg"}`, `"hello svc"`)
	e.ok(`{"operation":"continue"}`, "the program ended (exit code 0)")
	e.ok(`{"operation":"output"}`, "hello svc")

	e.ok(`{"operation":"breakpoints","file":"tool/main.go","lines":[7]}`)
	e.ok(`{"operation":"launch","program":"tool"}`, "launched tool with delve", "stopped (breakpoint)", "tool/main.go:7 in main.main")
	e.ok(`{"operation":"continue"}`, "the program ended (exit code 0)")
	e.ok(`{"operation":"launch","program":"tool/main.go"}`, "launched tool/main.go with delve", "stopped (breakpoint)", "tool/main.go:7")
	e.ok(`{"operation":"terminate"}`)
	noProcess(t, e.dir)
}

// Issue 11 item 11b: a launch that fails says what the adapter said (the
// compiler's errors for delve), not "check the debug console", which the
// model does not have.
func TestLaunchFailureCarriesAdapterOutput(t *testing.T) {
	e := newEnv(t, "golang", nil)
	if err := os.Mkdir(filepath.Join(e.dir, "broken"), 0o755); err != nil {
		t.Fatal(err)
	}
	src := "package main\n\nfunc main() {\n\tundefinedName()\n}\n"
	if err := os.WriteFile(filepath.Join(e.dir, "broken", "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	text := e.fails(`{"operation":"launch","program":"broken"}`, "launching broken with delve failed", "the adapter's last output:\nBuild Error: go build", "main.go:4:2: undefined: undefinedName")
	if strings.Contains(text, "debug console") {
		t.Fatalf("the error points at a debug console:\n%s", text)
	}
	noProcess(t, e.dir)
}

// Issue 11 item 11c: a frame_id that is not in the current stack, and a
// reference from before the program moved, are refused with the frames
// there are, instead of the adapter's confusion (debugpy dropped its
// server: "Server[1] disconnected unexpectedly"; lldb answered "0
// children"). The session lives on.
func TestStaleFrameAndReferenceAreRefusedWithTheFrames(t *testing.T) {
	for _, tc := range []struct {
		adapter, fixture, file, program string
		line                            int
		build                           bool
	}{
		{"debugpy", "python", "app.py", "app.py", 13, false},
		{"delve", "golang", "main.go", ".", 22, false},
		{"lldb", "c", "prog.c", "prog", 17, true},
	} {
		t.Run(tc.adapter, func(t *testing.T) {
			e := newEnv(t, tc.fixture, nil)
			if tc.build {
				if out, err := exec.Command("gcc", "-g", "-O0", "-o", filepath.Join(e.dir, "prog"), filepath.Join(e.dir, "prog.c")).CombinedOutput(); err != nil {
					t.Fatalf("gcc: %v\n%s", err, out)
				}
			}
			e.ok(fmt.Sprintf(`{"operation":"breakpoints","file":%q,"lines":[%d]}`, tc.file, tc.line))
			e.ok(fmt.Sprintf(`{"operation":"launch","program":%q}`, tc.program), "stopped (breakpoint)")
			st := e.ok(`{"operation":"stack"}`, "#0 frame_id")
			frame := after(t, st, "#0 frame_id ")
			sc := e.ok(`{"operation":"scopes","frame_id":`+frame+`}`, "Locals: reference")
			locals := after(t, sc, "Locals: reference ")

			e.fails(`{"operation":"scopes","frame_id":987654}`, "frame 987654 is not in the current stack; frames are", "#0 frame_id ", fmt.Sprintf("%s:%d", tc.file, tc.line))
			e.fails(`{"operation":"evaluate","expression":"1","frame_id":987654}`, "frame 987654 is not in the current stack")
			e.fails(`{"operation":"variables","reference":987654}`, "reference 987654 is not valid where the program is stopped now", "call scopes")

			e.ok(`{"operation":"step_over"}`, "stopped (step)")
			e.fails(`{"operation":"variables","reference":`+locals+`}`, "reference "+locals+" is not valid where the program is stopped now")
			e.ok(`{"operation":"status"}`, "debugging", "stopped (step)")
			st = e.ok(`{"operation":"stack"}`, "#0 frame_id")
			sc = e.ok(`{"operation":"scopes","frame_id":`+after(t, st, "#0 frame_id ")+`}`, "Locals: reference")
			e.ok(`{"operation":"variables","reference":`+after(t, sc, "Locals: reference ")+`}`, "name")
			e.ok(`{"operation":"terminate"}`)
			noProcess(t, e.dir)
		})
	}
}

// Issue 11 item 11d: a breakpoint past the end of its file is refused
// when it is set, with the file's length, before and during a session,
// and nothing of the call is applied.
func TestBreakpointPastTheEndOfItsFileIsRefused(t *testing.T) {
	e := newEnv(t, "python", nil)
	e.ok(`{"operation":"breakpoints","file":"app.py","lines":[13]}`)
	e.fails(`{"operation":"breakpoints","file":"app.py","lines":[5, 21]}`, "app.py has 20 lines, so line 21 is past its end: pass lines from 1 to 20")
	e.fails(`{"operation":"breakpoints","file":"app.py","lines":[400, 21]}`, "lines 400, 21 are past its end")
	e.ok(`{"operation":"launch","program":"app.py"}`, "app.py:13 verified", "stopped (breakpoint)", "app.py:13 in main")
	e.fails(`{"operation":"breakpoints","file":"app.py","lines":[14, 99]}`, "app.py has 20 lines, so line 99 is past its end")
	e.ok(`{"operation":"status"}`, "app.py:13")
	e.ok(`{"operation":"continue"}`, "the program ended (exit code 0)")

	// The last line counts without a final newline, and the count is
	// refused on something that is not a regular file.
	if err := os.WriteFile(filepath.Join(e.dir, "tail.py"), []byte("a = 1\nb = 2"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.ok(`{"operation":"breakpoints","file":"tail.py","lines":[2]}`, "stored 1 breakpoint")
	e.fails(`{"operation":"breakpoints","file":"tail.py","lines":[3]}`, "tail.py has 2 lines, so line 3 is past its end")
	if err := syscall.Mkfifo(filepath.Join(e.dir, "pipe.py"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.fails(`{"operation":"breakpoints","file":"pipe.py","lines":[1]}`, "pipe.py is not a readable file (not a regular file)")
	noProcess(t, e.dir)
}

// Issue 11 item 13: lldb's evaluate answers with the value once
// ("50 (int)"), not lldb's command style "(int) $1 = 50 (int)"; and a
// name that is also an lldb command is an expression, never the command
// (c would have continued the program).
func TestLLDBEvaluateAnswersTheValueOnly(t *testing.T) {
	e := newEnv(t, "c", nil)
	if out, err := exec.Command("gcc", "-g", "-O0", "-o", filepath.Join(e.dir, "prog"), filepath.Join(e.dir, "prog.c")).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	e.ok(`{"operation":"breakpoints","file":"prog.c","lines":[6]}`)
	e.ok(`{"operation":"launch","program":"prog"}`, "stopped (breakpoint)", "prog.c:6 in square")
	if got := e.ok(`{"operation":"evaluate","expression":"result + 1"}`); got != "50 (int)" {
		t.Fatalf("evaluate result + 1 = %q, want %q", got, "50 (int)")
	}
	if got := e.ok(`{"operation":"evaluate","expression":"n"}`); got != "7 (int)" {
		t.Fatalf("evaluate n = %q, want %q", got, "7 (int)")
	}
	e.fails(`{"operation":"evaluate","expression":"c"}`, "undeclared identifier 'c'")
	e.ok(`{"operation":"status"}`, "stopped (breakpoint)", "prog.c:6 in square")
	e.ok(`{"operation":"terminate"}`)
	noProcess(t, e.dir)
}
