package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/procfs"
)

// A debugpy session launched on the host and stopped at a breakpoint is
// given back to its conversation by a Berth started on the state
// directory of one killed with kill -9: run/start of the same run
// answers resumed, and the session is there without a relaunch (the same
// adapter process): status and stack show the same frame, on the same
// line, evaluate answers in it, the breakpoint is the stored one, and
// continue runs the program to its end with its output.
//
// Issue 29 item 3 (debug sessions).
func TestDebugSessionIsResumedByABerthOnTheSameStateDirectory(t *testing.T) {
	debugSessionIsResumed(t, onHost.fresh(t), nil, resumedDebugpy)
}

// The same with the handoff (orchestrator handoff) instead of kill -9.
//
// Issue 29 items 3 and 4 (debug sessions).
func TestDebugSessionIsResumedAfterAHandoff(t *testing.T) {
	d := resumedDebugpy
	d.handoff = true
	debugSessionIsResumed(t, onHost.fresh(t), nil, d)
}

// The same with lldb-dap on a C program built with the host's gcc: the
// same code keeps every adapter that talks over its stdio.
//
// Issue 29 item 3 (debug sessions, other adapters).
func TestLLDBSessionIsResumedByABerthOnTheSameStateDirectory(t *testing.T) {
	debugSessionIsResumed(t, onHost.fresh(t), nil, resumedLLDB)
}

// The same with the session in a Docker container: its adapter is taken
// back through berth-relay take, as a kernel is.
//
// Issue 29 item 3 (debug sessions, in containers).
func TestContainersDockerDebugSessionIsResumedByABerthOnTheSameStateDirectory(t *testing.T) {
	debugSessionIsResumed(t, inContainer(debugImage).fresh(t), nil, resumedDebugpy)
}

// The same in containerd.
//
// Issue 29 item 3 (debug sessions, in containers).
func TestContainersContainerdDebugSessionIsResumedByABerthOnTheSameStateDirectory(t *testing.T) {
	debugSessionIsResumed(t, inContainerd(t, debugImage).fresh(t), containerdSection.config, resumedDebugpy)
}

// The same in a pod of the Kubernetes stand-in.
//
// Issue 29 item 3 (debug sessions, in containers).
func TestContainersKubernetesStandInDebugSessionIsResumedByABerthOnTheSameStateDirectory(t *testing.T) {
	p := inKubernetes(t, debugImage)
	debugSessionIsResumed(t, p.fresh(t), kubernetesSection(t, p).config, resumedDebugpy)
}

// The same in a pod of the real cluster (its image berth/full:dev holds
// debugpy).
//
// Issue 29 item 3 (debug sessions, in containers; the real cluster's
// check of the issue).
func TestClusterDebugSessionIsResumedByABerthOnTheSameStateDirectory(t *testing.T) {
	t.Parallel()
	p := inCluster(t, fullImage)
	debugSessionIsResumed(t, p.fresh(t), clusterSection(t, p).config, resumedDebugpy)
}

// resumedSession is what debugSessionIsResumed launches and checks, for
// one adapter.
type resumedSession struct {
	adapter, program string
	setup            func(t *testing.T, s *site)
	file             string
	line             int
	adapterProcess   string // in the adapter's command line
	stopped, stack   []string
	expression, is   string
	output           string
	handoff          bool // Berth hands off rather than being killed
}

var resumedDebugpy = resumedSession{
	adapter: "debugpy", program: "app.py", file: "app.py", line: 3, adapterProcess: "-m debugpy.adapter",
	setup:      func(t *testing.T, s *site) { writeTree(t, s.Dir, debugApp) },
	stopped:    []string{"app.py:3 in main", `3 | print("hello", name)`},
	stack:      []string{"#0 frame_id", "app.py:3 in main", "app.py:6 in <module>"},
	expression: "name * 2", is: "'berthberth'", output: "hello berth",
}

var resumedLLDB = resumedSession{
	adapter: "lldb", program: "prog", file: "prog.c", line: 17, adapterProcess: "lldb-dap",
	setup: func(t *testing.T, s *site) {
		copyTree(t, filepath.Join("..", "orchestrator", "debug", "testdata", "c"), s.Dir)
		s.run(t, "gcc", "-g", "-O0", "-o", "prog", "prog.c")
	},
	stopped:    []string{"prog.c:17 in main", "17 | int total = square(7);"},
	stack:      []string{"#0 frame_id", "prog.c:17 in main"},
	expression: "name", is: "berth", output: "total 49 berth 10000",
}

// restartDebugConfig is a configuration for s's driver (its sections)
// with debugpy under Debian's python, a reattach grace of 2 minutes, and
// tune's changes.
func restartDebugConfig(t *testing.T, sections map[string]any, debug map[string]any) string {
	t.Helper()
	d := map[string]any{"python": "/usr/bin/python3", "stop_wait": "5s"}
	maps.Copy(d, debug)
	return keepingConfig(t, sections, map[string]any{"debug": d})
}

// debugSessionIsResumed is issue 29's check: x = 41 in a Python kernel
// and a session of d's adapter stopped at d's breakpoint in s, kill -9
// of Berth (or its handoff), a new Berth on the same state directory,
// run/start of the same run: x + 1 is 42, and the session is back,
// stopped where it was, in the same adapter; continue ends the program
// with its output; run/stop then leaves nothing, and no record.
func debugSessionIsResumed(t *testing.T, s *site, sections map[string]any, d resumedSession) {
	t.Helper()
	d.setup(t, s)
	config := restartDebugConfig(t, sections, nil)
	a, dir, params := keptRunWithX(t, s, config, "run-debug-resumed")
	at := fmt.Sprintf("%s:%d", d.file, d.line)
	debugCall(t, a.c, params.RunID, map[string]any{"operation": "breakpoints", "file": d.file, "lines": []int{d.line}}, "stored 1 breakpoint")
	debugCall(t, a.c, params.RunID, map[string]any{"operation": "launch", "program": d.program}, append([]string{at + " verified", "stopped (breakpoint)"}, d.stopped...)...)
	before := debugCall(t, a.c, params.RunID, map[string]any{"operation": "stack"}, d.stack...)
	driver := "host"
	if s.Container != "" {
		driver = s.driver()
	}
	recs := recordsOf(t, dir, "debug")
	if len(recs) != 1 || recs[0].Kind != "debug" || recs[0].Role != d.adapter || recs[0].Conversation != s.Conversation || recs[0].Enclosure.Driver != driver {
		t.Fatalf("records %+v, want the debugpy adapter's", recs)
	}
	var data struct {
		Program     string
		Launched    time.Time
		Breakpoints map[string][]int
		Stop        *struct {
			Thread int
			Reason string
		}
	}
	if err := json.Unmarshal(recs[0].Data, &data); err != nil || data.Program != d.program || data.Launched.IsZero() ||
		data.Stop == nil || data.Stop.Reason != "breakpoint" || len(data.Breakpoints) != 1 {
		t.Fatalf("the record's data %s (%v): want the program, its launch, its breakpoint and its stop", recs[0].Data, err)
	}
	adapters := func() []string {
		var out []string
		for _, p := range s.processes(t) {
			if strings.Contains(p, d.adapterProcess) && !strings.Contains(p, "berth-relay") {
				out = append(out, p)
			}
		}
		return out
	}
	adapter := adapters()
	if len(adapter) != 1 {
		t.Fatalf("the adapter's process: %v, want one in %v", adapter, s.processes(t))
	}
	if d.handoff {
		t.Logf("handoff: %s", strings.TrimSpace(a.handOff(t)))
	} else {
		a.kill(t)
	}

	start := time.Now()
	b := startBerth(t, config, dir)
	started := time.Since(start)
	s.asker.set(b.c) // the language servers it parks are not left over
	resumedAt := time.Now()
	r, err := b.c.StartRun(testCtx(t), params)
	if err != nil {
		t.Fatalf("run/start: %v\nthe new Berth's log:\n%s", err, b.stderr.String())
	}
	t.Logf("%s: from the new Berth's start to the resumed debug session: %v (its start, the take back and initialize: %v; the resuming run/start, with the session read again from the adapter: %v)",
		driver, time.Since(start).Round(time.Millisecond), started.Round(time.Millisecond), time.Since(resumedAt).Round(time.Millisecond))
	if !r.Resumed {
		t.Fatalf("run/start's result %+v does not say resumed; the new Berth's log:\n%s", r, b.stderr.String())
	}
	debugCall(t, b.c, params.RunID, map[string]any{"operation": "status"}, append([]string{"session: " + d.adapter + " debugging " + d.program, "stopped (breakpoint)"}, d.stopped...)...)
	after := debugCall(t, b.c, params.RunID, map[string]any{"operation": "stack"}, d.stack...)
	if frames(before) != frames(after) {
		t.Errorf("the stack before the restart:\n%s\nafter:\n%s\nwant the same frames", before, after)
	}
	if now := adapters(); len(now) != 1 || now[0] != adapter[0] {
		t.Errorf("the adapter's process was %v, and is %v after the resume: want the same, not a relaunch", adapter, now)
	}
	debugCall(t, b.c, params.RunID, map[string]any{"operation": "evaluate", "expression": d.expression}, d.is)
	if res := evalCell(t, b.c, params.RunID, "python", "x + 1"); res.IsError || text(res) != "42" {
		t.Fatalf("x + 1 in the resumed kernel: %s", text(res))
	}
	debugCall(t, b.c, params.RunID, map[string]any{"operation": "breakpoints", "file": d.file, "lines": []int{d.line}}, at+" verified")
	debugCall(t, b.c, params.RunID, map[string]any{"operation": "continue"}, "the program ended (exit code 0)")
	debugCall(t, b.c, params.RunID, map[string]any{"operation": "output"}, d.output)
	if err := b.c.StopRun(testCtx(t), params.RunID); err != nil {
		t.Fatal(err)
	}
	s.waitNoProcesses(t, "run/stop of the resumed run")
	waitNoRecords(t, dir, "run/stop", "debug", "kernel")
}

// frames is a stack's frames without their ids.
func frames(stack string) string {
	var out []string
	for _, l := range strings.Split(stack, "\n") {
		if i := strings.Index(l, ": "); strings.HasPrefix(l, "#") && i > 0 {
			out = append(out, l[:strings.Index(l, " ")]+l[i:])
		} else {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A debug session whose time to live (debug.session_ttl, counted from
// its launch) passed while no Berth was there is ended by the Berth that
// comes back, not resumed: its adapter and program are gone, status
// says why, and the stored breakpoints are kept.
//
// Issue 29 item 3 (debug sessions: the TTL keeps counting from the
// launch).
func TestDebugSessionWhoseTTLPassedWhileBerthWasAwayIsEnded(t *testing.T) {
	s := onHost.fresh(t)
	writeTree(t, s.Dir, debugApp)
	dir := filepath.Join(t.TempDir(), "state")
	const ttl = 3 * time.Second
	config := restartDebugConfig(t, nil, map[string]any{"session_ttl": ttl.String()})
	a := startBerth(t, config, dir)
	params := s.params(nil)
	params.RunID = "run-debug-ttl"
	if _, err := a.c.StartRun(testCtx(t), params); err != nil {
		t.Fatal(err)
	}
	debugCall(t, a.c, params.RunID, map[string]any{"operation": "breakpoints", "file": "app.py", "lines": []int{3}}, "stored 1 breakpoint")
	debugCall(t, a.c, params.RunID, map[string]any{"operation": "launch", "program": "app.py"}, "stopped (breakpoint)")
	launched := time.Now()
	rec := recordsOf(t, dir, "debug")
	if len(rec) != 1 {
		t.Fatalf("records %+v, want the adapter's", rec)
	}
	a.kill(t)
	time.Sleep(ttl - time.Since(launched) + 500*time.Millisecond)
	if !procfs.Alive(rec[0].Relay.Pid) {
		t.Fatal("the adapter did not outlive Berth")
	}

	b := startBerth(t, config, dir)
	s.asker.set(b.c)
	if _, err := b.c.StartRun(testCtx(t), params); err != nil {
		t.Fatalf("run/start: %v\nthe new Berth's log:\n%s", err, b.stderr.String())
	}
	debugCall(t, b.c, params.RunID, map[string]any{"operation": "status"}, "no debug session is running", "its time to live (3s) passed while Berth was away",
		"stored breakpoints in 1 file")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		left := slices.DeleteFunc(s.processes(t), func(p string) bool { return !strings.Contains(p, "debugpy") })
		if len(left) == 0 && !procfs.Alive(rec[0].Relay.Pid) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session past its time to live was not ended: %v", left)
		}
	}
	if err := b.c.StopRun(testCtx(t), params.RunID); err != nil {
		t.Fatal(err)
	}
	s.waitNoProcesses(t, "run/stop")
	if !strings.Contains(b.stderr.String(), "passed while Berth was away") {
		t.Errorf("the new Berth's log does not say why the session was ended:\n%s", b.stderr.String())
	}
	waitNoRecords(t, dir, "run/stop", "debug", "kernel")
}

// A program that reaches its breakpoint while no Berth is there (launched,
// still running when Berth was killed) is found stopped there by the
// Berth that comes back: the adapter's stopped event, held in its pipe by
// the relay, is read by the resumed session.
//
// Issue 29 item 3 (debug sessions).
func TestDebugProgramThatStoppedWhileBerthWasAwayIsFoundStopped(t *testing.T) {
	s := onHost.fresh(t)
	writeTree(t, s.Dir, map[string]string{"requirements.txt": "# none\n", "late.py": "import time\ntime.sleep(3)\nx = 1\nprint(\"late\", x)\n"})
	dir := filepath.Join(t.TempDir(), "state")
	config := restartDebugConfig(t, nil, map[string]any{"stop_wait": "1s"})
	a := startBerth(t, config, dir)
	params := s.params(nil)
	params.RunID = "run-debug-late"
	if _, err := a.c.StartRun(testCtx(t), params); err != nil {
		t.Fatal(err)
	}
	debugCall(t, a.c, params.RunID, map[string]any{"operation": "breakpoints", "file": "late.py", "lines": []int{4}}, "stored 1 breakpoint")
	debugCall(t, a.c, params.RunID, map[string]any{"operation": "launch", "program": "late.py"}, "still running")
	a.kill(t)
	time.Sleep(4 * time.Second) // the program stops at line 4 meanwhile

	b := startBerth(t, config, dir)
	s.asker.set(b.c)
	if r, err := b.c.StartRun(testCtx(t), params); err != nil || !r.Resumed {
		t.Fatalf("run/start: %+v, %v\nthe new Berth's log:\n%s", r, err, b.stderr.String())
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		st := text(callTool(t, b.c, params.RunID, "debug", map[string]any{"operation": "status"}))
		if strings.Contains(st, "stopped (breakpoint)") {
			has := strings.Contains(st, "late.py:4 in <module>")
			if !has {
				t.Fatalf("status: %s, want the stop at late.py:4", st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status: %s, want the program stopped at its breakpoint", st)
		}
	}
	debugCall(t, b.c, params.RunID, map[string]any{"operation": "evaluate", "expression": "x + 1"}, "2")
	debugCall(t, b.c, params.RunID, map[string]any{"operation": "continue"}, "the program ended (exit code 0)")
	debugCall(t, b.c, params.RunID, map[string]any{"operation": "output"}, "late 1")
	if err := b.c.StopRun(testCtx(t), params.RunID); err != nil {
		t.Fatal(err)
	}
	s.waitNoProcesses(t, "run/stop")
}

// A program continued from a breakpoint, Berth killed while it waited for
// the next stop, is found running by the Berth that comes back, not at its old
// stop; it stops at its next breakpoint there, and runs to its end.
//
// Issue 29 item 3 (debug sessions).
func TestDebugProgramRunningWhenBerthWasKilledIsFoundRunning(t *testing.T) {
	s := onHost.fresh(t)
	writeTree(t, s.Dir, map[string]string{"requirements.txt": "# none\n", "slow.py": "import time\nx = 0\ntime.sleep(4)\nx = 1\nprint(\"done\", x)\n"})
	dir := filepath.Join(t.TempDir(), "state")
	config := restartDebugConfig(t, nil, map[string]any{"stop_wait": "30s"})
	a := startBerth(t, config, dir)
	params := s.params(nil)
	params.RunID = "run-debug-running"
	if _, err := a.c.StartRun(testCtx(t), params); err != nil {
		t.Fatal(err)
	}
	debugCall(t, a.c, params.RunID, map[string]any{"operation": "breakpoints", "file": "slow.py", "lines": []int{2, 5}}, "stored 2 breakpoints")
	debugCall(t, a.c, params.RunID, map[string]any{"operation": "launch", "program": "slow.py"}, "stopped (breakpoint)", "slow.py:2")
	// Killed during the continue's wait for the next stop.
	continued := make(chan error, 1)
	go func() {
		_, err := a.c.CallTool(testCtx(t), params.RunID, "", "debug", map[string]any{"operation": "continue"})
		continued <- err
	}()
	time.Sleep(time.Second)
	a.kill(t)
	if err := <-continued; err == nil {
		t.Fatal("the continue was answered before Berth was killed: make the wait longer")
	}

	b := startBerth(t, config, dir)
	s.asker.set(b.c)
	if r, err := b.c.StartRun(testCtx(t), params); err != nil || !r.Resumed {
		t.Fatalf("run/start: %+v, %v\nthe new Berth's log:\n%s", r, err, b.stderr.String())
	}
	if st := debugCall(t, b.c, params.RunID, map[string]any{"operation": "status"}, "session: debugpy debugging slow.py"); strings.Contains(st, "stopped") {
		t.Fatalf("status of a running program: %s", st)
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		st := text(callTool(t, b.c, params.RunID, "debug", map[string]any{"operation": "status"}))
		if strings.Contains(st, "stopped (breakpoint)") {
			if !strings.Contains(st, "slow.py:5 in <module>") {
				t.Fatalf("status: %s, want the stop at slow.py:5", st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status: %s, want the program stopped at its next breakpoint", st)
		}
	}
	debugCall(t, b.c, params.RunID, map[string]any{"operation": "continue"}, "the program ended (exit code 0)")
	debugCall(t, b.c, params.RunID, map[string]any{"operation": "output"}, "done 1")
	if err := b.c.StopRun(testCtx(t), params.RunID); err != nil {
		t.Fatal(err)
	}
	s.waitNoProcesses(t, "run/stop")
}
