package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/procfs"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// debugConfig names Debian's interpreter, the one with python3-debugpy
// (the python3 first on PATH may lack it).
const debugConfig = "debug:\n  python: /usr/bin/python3\n  stop_wait: 2s\n"

// debugApp is a Python project with a program worth stopping in.
var debugApp = map[string]string{
	"requirements.txt": "# none\n",
	"app.py":           "def main():\n    name = \"berth\"\n    print(\"hello\", name)\n\n\nmain()\n",
	"serve.py":         "import time\nwhile True:\n    time.sleep(0.05)\n",
}

// startDebug starts the binary with debugConfig and a run for a
// conversation in a fresh copy of debugApp.
func startDebug(t *testing.T, conversation string) (*rpc.Client, string, string) {
	t.Helper()
	c := startWithConfig(t, debugConfig)
	dir := t.TempDir()
	for name, body := range debugApp {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir, _ = filepath.EvalSymlinks(dir)
	r, err := c.StartRun(testCtx(t), rpc.StartRunParams{Workdir: dir, ConversationID: conversation})
	if err != nil {
		t.Fatal(err)
	}
	return c, r.RunID, dir
}

// debugCall calls debug on the full surface and wants a success holding
// every want.
func debugCall(t *testing.T, c *rpc.Client, run string, args map[string]any, want ...string) string {
	t.Helper()
	res := callTool(t, c, run, "debug", args)
	got := text(res)
	t.Logf(">> debug %v\n<< %s", args, got)
	if res.IsError {
		t.Fatalf("debug %v failed: %s", args, got)
	}
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Fatalf("debug %v: missing %q in:\n%s", args, w, got)
		}
	}
	return got
}

// debug is an exec tool: listed on the full surface only, refused from
// plan and readonly, and offered only to a run with a conversation id.
func TestDebugSurfaces(t *testing.T) {
	c, run, dir := startDebug(t, "conv-surfaces")
	if !slices.Contains(toolNames(t, c, run, orchestrator.SurfaceFull), "debug") {
		t.Fatalf("the full surface lacks debug")
	}
	for _, s := range []orchestrator.Surface{orchestrator.SurfacePlan, orchestrator.SurfaceReadonly} {
		if slices.Contains(toolNames(t, c, run, s), "debug") {
			t.Errorf("the %s surface lists debug", s)
		}
		res := callToolOn(t, c, run, s, "debug", map[string]any{"operation": "adapters"})
		if !res.IsError || !strings.Contains(text(res), "not allowed on the "+string(s)+" surface") {
			t.Errorf("debug on %s: want a refusal, got %+v", s, res)
		}
	}
	r, err := c.StartRun(testCtx(t), rpc.StartRunParams{Workdir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(toolNames(t, c, r.RunID, orchestrator.SurfaceFull), "debug") {
		t.Errorf("a run without a conversation id lists debug")
	}
}

// A debugpy session through the protocol; run/stop ends it and leaves no
// process in the working directory.
func TestDebugThroughProtocol(t *testing.T) {
	c, run, dir := startDebug(t, "conv-session")
	debugCall(t, c, run, map[string]any{"operation": "adapters"}, "debugpy: usable")
	debugCall(t, c, run, map[string]any{"operation": "breakpoints", "file": "app.py", "lines": []int{3}}, "stored 1 breakpoint")
	debugCall(t, c, run, map[string]any{"operation": "launch", "program": "app.py"}, "app.py:3 verified", "stopped (breakpoint)", `3 | print("hello", name)`)
	debugCall(t, c, run, map[string]any{"operation": "evaluate", "expression": "name * 2"}, "'berthberth'")
	debugCall(t, c, run, map[string]any{"operation": "continue"}, "the program ended (exit code 0)")
	debugCall(t, c, run, map[string]any{"operation": "output"}, "hello berth")

	debugCall(t, c, run, map[string]any{"operation": "launch", "program": "serve.py"}, "still running")
	if err := c.StopRun(testCtx(t), run); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		left := processesIn(dir)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left in %s after run/stop: %v", dir, left)
		}
	}
}

// processesIn lists the processes (zombies too) whose working directory
// is inside dir.
func processesIn(dir string) []string { return procfs.Strings(procfs.In(dir)) }
