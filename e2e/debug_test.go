package e2e

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// debugSection names Debian's interpreter, the one with python3-debugpy
// (the python3 first on PATH may lack it; in the images it is the one).
var debugSection = map[string]any{"debug": map[string]any{"python": "/usr/bin/python3", "stop_wait": "2s"}}

// debugApp is a Python project with a program worth stopping in, and a
// service that runs until killed, to attach to.
var debugApp = map[string]string{
	"requirements.txt": "# none\n",
	"app.py":           "def main():\n    name = \"berth\"\n    print(\"hello\", name)\n\n\nmain()\n",
	"serve.py":         "import time\nwhile True:\n    time.sleep(0.05)\n",
	"service.py":       "import time\ncount = 0\nwhile True:\n    count += 1\n    time.sleep(0.05)\n",
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
	c := startFamilies(t, debugpy)
	s := onHost.fresh(t)
	writeTree(t, s.Dir, debugApp)
	run, dir := s.start(t, c, nil), s.Dir
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
func TestDebugThroughProtocol(t *testing.T) { runFamily(t, onHost, debugpy) }

var debugpy = family{name: "debug-debugpy", config: debugSection, check: func(t *testing.T, c *rpc.Client, s *site) {
	writeTree(t, s.Dir, debugApp)
	run := s.start(t, c, nil)
	debugCall(t, c, run, map[string]any{"operation": "adapters"}, "debugpy: usable")
	debugCall(t, c, run, map[string]any{"operation": "breakpoints", "file": "app.py", "lines": []int{3}}, "stored 1 breakpoint")
	debugCall(t, c, run, map[string]any{"operation": "launch", "program": "app.py"}, "app.py:3 verified", "stopped (breakpoint)", `3 | print("hello", name)`)
	st := debugCall(t, c, run, map[string]any{"operation": "stack"}, "#0 frame_id", "app.py:3 in main", "app.py:6 in <module>")
	if strings.Contains(st, s.Inside+"/") && s.Inside != "" {
		t.Errorf("the stack shows the container's paths:\n%s", st)
	}
	debugCall(t, c, run, map[string]any{"operation": "evaluate", "expression": "name * 2"}, "'berthberth'")
	debugCall(t, c, run, map[string]any{"operation": "continue"}, "the program ended (exit code 0)")
	debugCall(t, c, run, map[string]any{"operation": "output"}, "hello berth")

	debugCall(t, c, run, map[string]any{"operation": "launch", "program": "serve.py"}, "still running")
	if err := c.StopRun(testCtx(t), run); err != nil {
		t.Fatal(err)
	}
	s.waitNoProcesses(t, "run/stop")
}}

// Attaching to a service already running in the place (debugpy listening
// on a port there, reached through the enclosure's Dial); terminate
// detaches and leaves it running.
func TestDebugAttachThroughProtocol(t *testing.T) { runFamily(t, onHost, debugAttach) }

var debugAttach = family{name: "debug-attach", config: debugSection, check: func(t *testing.T, c *rpc.Client, s *site) {
	writeTree(t, s.Dir, debugApp)
	port := 20000 + rand.IntN(20000)
	stop := s.service(t, "/usr/bin/python3", "-m", "debugpy", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--wait-for-client", "service.py")
	for deadline := time.Now().Add(20 * time.Second); !s.listeningIn(t, port); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("debugpy did not listen on %d in %s", port, s.place)
		}
	}
	run := s.start(t, c, nil)
	debugCall(t, c, run, map[string]any{"operation": "breakpoints", "file": "service.py", "lines": []int{4}}, "stored 1 breakpoint")
	debugCall(t, c, run, map[string]any{"operation": "attach", "port": port}, fmt.Sprintf("attached to the debugpy on port %d", port), "service.py:4 verified")
	debugCall(t, c, run, map[string]any{"operation": "pause"}, "service.py:4", "count += 1")
	debugCall(t, c, run, map[string]any{"operation": "evaluate", "expression": "count >= 0"}, "True")
	debugCall(t, c, run, map[string]any{"operation": "breakpoints", "file": "service.py", "lines": []int{}}, "cleared")
	debugCall(t, c, run, map[string]any{"operation": "terminate"}, "detached from the program on port", "keeps running")
	if !slices.ContainsFunc(s.processes(t), func(p string) bool { return strings.Contains(p, "service.py") }) {
		t.Fatalf("the service did not survive the detach: %v", s.processes(t))
	}
	stop()
	if err := c.StopRun(testCtx(t), run); err != nil {
		t.Fatal(err)
	}
	s.waitNoProcesses(t, "run/stop")
}}

// dlv dap (a TCP server, reached through the enclosure's Dial) on a Go
// package it builds, and lldb-dap on a C program built with the place's
// own gcc: launch to a breakpoint, step, evaluate, run to the end.
func TestDebugAdaptersThroughProtocol(t *testing.T) {
	for _, f := range []family{debugDelve, debugLLDB} {
		t.Run(f.name, func(t *testing.T) { runFamily(t, onHost, f) })
	}
}

var debugDelve = family{name: "debug-delve", config: debugSection, check: func(t *testing.T, c *rpc.Client, s *site) {
	copyTree(t, filepath.Join("..", "orchestrator", "debug", "testdata", "golang"), s.Dir)
	run := s.start(t, c, nil)
	debugCall(t, c, run, map[string]any{"operation": "breakpoints", "file": "main.go", "lines": []int{22}}, "stored 1 breakpoint")
	debugCall(t, c, run, map[string]any{"operation": "launch", "program": "."},
		"launched . with delve", "main.go:22 verified", "stopped (breakpoint)", "main.go:22 in main.main", "22 | total := square(7)")
	debugCall(t, c, run, map[string]any{"operation": "step_in"}, "main.go:9 in main.square")
	debugCall(t, c, run, map[string]any{"operation": "step_out"}, "main.go:22 in main.main")
	debugCall(t, c, run, map[string]any{"operation": "evaluate", "expression": "len(name)"}, "5")
	debugCall(t, c, run, map[string]any{"operation": "continue"}, "the program ended (exit code 0)")
	debugCall(t, c, run, map[string]any{"operation": "output"}, "total 49 500 10000 berth")
	if err := c.StopRun(testCtx(t), run); err != nil {
		t.Fatal(err)
	}
	s.waitNoProcesses(t, "run/stop")
}}

var debugLLDB = family{name: "debug-lldb", config: debugSection, check: func(t *testing.T, c *rpc.Client, s *site) {
	copyTree(t, filepath.Join("..", "orchestrator", "debug", "testdata", "c"), s.Dir)
	s.run(t, "gcc", "-g", "-O0", "-o", "prog", "prog.c")
	run := s.start(t, c, nil)
	debugCall(t, c, run, map[string]any{"operation": "breakpoints", "file": "prog.c", "lines": []int{17}}, "stored 1 breakpoint")
	debugCall(t, c, run, map[string]any{"operation": "launch", "program": "prog"},
		"launched prog with lldb", "prog.c:17 verified", "stopped (breakpoint)", "17 | int total = square(7);")
	debugCall(t, c, run, map[string]any{"operation": "step_in"}, "prog.c:5 in square", "5 | int result = n * n;")
	debugCall(t, c, run, map[string]any{"operation": "step_out"}, "prog.c:17 in main")
	debugCall(t, c, run, map[string]any{"operation": "continue"}, "the program ended (exit code 0)")
	debugCall(t, c, run, map[string]any{"operation": "output"}, "total 49 berth 10000")
	if err := c.StopRun(testCtx(t), run); err != nil {
		t.Fatal(err)
	}
	s.waitNoProcesses(t, "run/stop")
}}
