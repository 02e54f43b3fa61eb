package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/procfs"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// cell is eval's arguments for one cell of Python.
func cell(code string) map[string]any {
	return map[string]any{"code": code, "language": "python", "description": "run one cell for the end to end test"}
}

// handOff runs `orchestrator handoff --pid` on Berth and waits for it
// to exit; it must exit with status 0.
func (b *berth) handOff(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(binary, "handoff", "--pid", strconv.Itoa(b.cmd.Process.Pid)).CombinedOutput()
	if err != nil {
		t.Fatalf("orchestrator handoff: %v: %s\nBerth's log:\n%s", err, out, b.stderr.String())
	}
	_ = b.c.Close() // waits for Berth's exit
	if st := b.cmd.ProcessState; st == nil || st.ExitCode() != 0 {
		t.Fatalf("Berth after its handoff: %v, want status 0\n%s", st, b.stderr.String())
	}
	return string(out)
}

// The host kernel test with a handoff instead of a kill -9: x = 41, a
// cell still running when `orchestrator handoff` asks Berth to hand off,
// and a call sent during the handoff. The call sent then is refused with
// -32007 (restarting) and nothing else fails: the running cell is
// answered, Berth exits with status 0, and a new Berth on the state
// directory resumes the run with its kernel: x + 1 is 42, the cell's y
// is there, and a retry of the cell's callId gets its answer again
// without running it.
//
// Issue 29 item 4.
func TestKernelIsResumedAfterAHandoff(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	workdir := t.TempDir()
	config := writeConfig(t, "kernels:\n  python: /usr/bin/python3\nenclosure:\n  reattach_grace: 2m\nruns:\n  disconnect_grace: 30s\n  handoff_timeout: 10s\n")
	a := startBerth(t, config, dir)
	ctx := testCtx(t)
	params := rpc.StartRunParams{RunID: "run-handoff", ConversationID: "conv-handoff", Workdir: workdir}
	if _, err := a.c.StartRun(ctx, params); err != nil {
		t.Fatal(err)
	}
	if res := evalCell(t, a.c, params.RunID, "python", "x = 41\nx"); res.IsError || text(res) != "41" {
		t.Fatalf("the first cell: %s", text(res))
	}
	rec := records(t, dir)[0]
	t.Cleanup(func() { _ = syscallKill(rec.Relay.Pid) })

	var (
		wg      sync.WaitGroup
		running *orchestrator.Result
		runErr  error
	)
	wg.Go(func() {
		running, runErr = a.c.CallToolWithID(ctx, "cell-y", params.RunID, "", "eval", cell("import time\ntime.sleep(1.5)\ny = 2\ny"))
	})
	time.Sleep(300 * time.Millisecond) // the cell runs
	handedOff := make(chan string, 1)
	start := time.Now()
	go func() { handedOff <- a.handOff(t) }()
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(a.stderr.String(), "handing off"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Berth does not say it is handing off:\n%s", a.stderr.String())
		}
	}
	_, err := a.c.CallTool(ctx, params.RunID, "", "eval", cell("x"))
	if rpcCode(err) != rpc.CodeRestarting || !strings.Contains(err.Error(), "send it again") {
		t.Fatalf("a call during the handoff: %v, want -32007 restarting saying to send it again", err)
	}
	wg.Wait()
	if runErr != nil || running.IsError || text(running) != "2" {
		t.Fatalf("the cell running at the handoff: %v, %+v; want its answer, 2", runErr, running)
	}
	out := <-handedOff
	t.Logf("handoff: %s (%v from the signal to Berth's exit)", strings.TrimSpace(out), time.Since(start))
	if !procfs.Alive(rec.Relay.Pid) {
		t.Fatal("the kernel did not outlive the handoff")
	}

	begin := time.Now()
	b := startBerth(t, config, dir)
	r, err := b.c.StartRun(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("from the new Berth's start to the resumed run: %v", time.Since(begin))
	if !r.Resumed {
		t.Fatalf("run/start's result %+v does not say resumed", r)
	}
	if res := evalCell(t, b.c, params.RunID, "python", "x + 1 + y - 2"); res.IsError || text(res) != "42" {
		t.Fatalf("x + 1 in the resumed kernel: %s", text(res))
	}
	again, err := b.c.CallToolWithID(ctx, "cell-y", params.RunID, "", "eval", cell("import time\ntime.sleep(1.5)\ny = 2\ny"))
	if err != nil || text(again) != "2" {
		t.Fatalf("a retry of the cell's callId: %v, %+v; want its answer kept, 2", err, again)
	}
	if !strings.Contains(b.stderr.String(), "how=handoff") {
		t.Errorf("the new Berth does not say the one before handed off:\n%s", b.stderr.String())
	}
	if err := b.c.StopRun(ctx, params.RunID); err != nil {
		t.Fatal(err)
	}
}

// A call in flight when Berth is killed is never run twice: a retry of
// its callId on the Berth started again on the state directory gets
// -32008 "Berth restarted: the call's result is unknown"; a retry of an
// answered call's id gets its answer kept; a read-tier call with no
// known outcome runs again.
//
// Issue 29 item 3.
func TestCallInFlightWhenBerthIsKilledIsNotRunTwice(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	workdir := t.TempDir()
	config := writeConfig(t, "kernels:\n  python: /usr/bin/python3\nenclosure:\n  reattach_grace: 2m\nruns:\n  disconnect_grace: 30s\n")
	a := startBerth(t, config, dir)
	ctx := testCtx(t)
	params := rpc.StartRunParams{RunID: "run-calls", Workdir: workdir}
	if _, err := a.c.StartRun(ctx, params); err != nil {
		t.Fatal(err)
	}
	first, err := a.c.CallToolWithID(ctx, "cell-1", params.RunID, "", "eval", cell("x = 41\nx"))
	if err != nil || text(first) != "41" {
		t.Fatalf("the first cell: %v, %+v", err, first)
	}
	rec := records(t, dir)[0]
	t.Cleanup(func() { _ = syscallKill(rec.Relay.Pid) })
	// A cell that appends a line to a file, and is still running when
	// Berth is killed.
	marker := filepath.Join(workdir, "runs.txt")
	code := "import time\nopen(" + strconv.Quote(marker) + ", 'a').write('ran\\n')\ntime.sleep(1)"
	inFlight, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _, _ = a.c.CallToolWithID(inFlight, "cell-2", params.RunID, "", "eval", cell(code)) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if files, _ := filepath.Glob(filepath.Join(dir, "calls", "*.json")); len(files) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the call in flight was not recorded in calls/")
		}
	}
	time.Sleep(200 * time.Millisecond)
	a.kill(t)

	b := startBerth(t, config, dir)
	if _, err := b.c.StartRun(ctx, params); err != nil {
		t.Fatal(err)
	}
	_, err = b.c.CallToolWithID(ctx, "cell-2", params.RunID, "", "eval", cell(code))
	if rpcCode(err) != rpc.CodeOutcomeUnknown || !strings.Contains(err.Error(), "Berth restarted: the call's result is unknown") {
		t.Fatalf("a retry of the call in flight: %v, want -32008 saying the result is unknown", err)
	}
	again, err := b.c.CallToolWithID(ctx, "cell-1", params.RunID, "", "eval", cell("x = 41\nx"))
	if err != nil || text(again) != "41" {
		t.Fatalf("a retry of the answered call: %v, %+v; want its answer kept", err, again)
	}
	time.Sleep(1200 * time.Millisecond) // the killed Berth's cell is done
	if ran, _ := os.ReadFile(marker); strings.Count(string(ran), "ran") != 1 {
		t.Fatalf("the cell ran %d times, want once", strings.Count(string(ran), "ran"))
	}
	if !strings.Contains(b.stderr.String(), "how=crash") {
		t.Errorf("the new Berth does not say the one before crashed:\n%s", b.stderr.String())
	}
}
