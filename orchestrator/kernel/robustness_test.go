package kernel

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/berth-dev/berth/orchestrator"
)

// noLeaks checks, after every other cleanup of the test (the run's end
// among them), that the test left no goroutine and no file descriptor
// behind. Register it before newEnv.
func noLeaks(t *testing.T) {
	t.Helper()
	before := openFDs(t)
	t.Cleanup(func() {
		goleak.VerifyNone(t)
		var after int
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if after = openFDs(t); after <= before {
				return
			}
		}
		t.Errorf("%d file descriptors open after the test, %d before", after, before)
	})
}

func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// peakRSS is the kernel process's high-water resident memory, in MB.
func peakRSS(t *testing.T, pid int) int {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int
			fmt.Sscan(rest, &kb)
			return kb >> 10
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}

// TestFlood: a cell that prints 100 MB comes back capped, head and tail,
// and the kernel does not hold the flood in memory: it waits for Berth to
// read, so its peak grows far less than what it printed.
func TestFlood(t *testing.T) {
	noLeaks(t)
	tests := []struct {
		lang, code string
	}{
		{Python, "import sys\nline = 'x' * 1023 + '\\n'\nfor i in range(100 * 1024):\n    sys.stdout.write(line)\nprint('the end')"},
		{JavaScript, "const line = 'x'.repeat(1023) + '\\n'\nfor (let i = 0; i < 100 * 1024; i++) process.stdout.write(line)\nconsole.log('the end')"},
	}
	for _, tt := range tests {
		t.Run(tt.lang, func(t *testing.T) {
			e := newEnv(t, testConfig(), nil)
			pid := e.pidOf(tt.lang)
			opt := func(a map[string]any) { a["language"] = tt.lang }
			base := peakRSS(t, pid)
			start := time.Now()
			got := mustOK(t, e.eval(tt.code, opt))
			took := time.Since(start)
			if !strings.Contains(got, "MB of output cut here") || !strings.HasSuffix(got, "the end\n") || len(got) > 2*testConfig().OutputLimit {
				t.Errorf("flood result (%d bytes) is not capped head and tail:\n%.300s…", len(got), got)
			}
			grew := peakRSS(t, pid) - base
			if grew > 40 {
				t.Errorf("the %s kernel's peak memory grew by %d MB printing 100 MB: the flood was buffered", tt.lang, grew)
			}
			t.Logf("100 MB printed in %s; the kernel's peak memory grew by %d MB", took, grew)
		})
	}
}

// TestKilledWhileFlooding: a cell that floods output and ignores the
// interrupt is killed after the grace, and nothing of it lingers (the
// frame reader must not stay blocked on a cell nobody reads).
func TestKilledWhileFlooding(t *testing.T) {
	noLeaks(t)
	cfg := testConfig()
	cfg.InterruptGrace = 500 * time.Millisecond
	e := newEnv(t, cfg, nil)
	pid := e.pidOf(Python)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r := e.evalCtx(ctx, "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    print('x' * 4000)")
	if !r.IsError || !strings.Contains(text(r), "was killed") {
		t.Fatalf("flooding cell that ignores the interrupt:\n%.2000s", text(r))
	}
	waitGone(t, pid)
	if got := mustOK(t, e.eval("'fresh'")); got != "'fresh'" {
		t.Errorf("next cell: %s", got)
	}
}

// TestResetWhileCellRuns: eval calls on a run are serialised, so a reset
// sent while a cell runs waits for it, then discards its kernel.
func TestResetWhileCellRuns(t *testing.T) {
	noLeaks(t)
	e := newEnv(t, testConfig(), nil)
	pid := e.pidOf(Python)
	var wg sync.WaitGroup
	var first *orchestrator.Result
	wg.Add(1)
	go func() {
		defer wg.Done()
		first = e.eval("import time\nopen('started', 'w').close()\ntime.sleep(1)\nkept = 'slow cell done'\nkept")
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(e.dir, "started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slow cell never started")
		}
	}
	got := mustOK(t, e.eval("'kept' in globals()", reset))
	wg.Wait()
	if text(first) != "'slow cell done'" {
		t.Errorf("the running cell was disturbed by the reset: %s", text(first))
	}
	if got != "False" {
		t.Errorf("the reset did not start a fresh kernel: %s", got)
	}
	waitGone(t, pid)
}

// TestTwoRuns: each run has its own kernels; ending one leaves the other's
// state and process alone.
func TestTwoRuns(t *testing.T) {
	noLeaks(t)
	a := newEnv(t, testConfig(), nil)
	b := newEnv(t, testConfig(), nil)
	mustOK(t, a.eval("who = 'a'"))
	mustOK(t, b.eval("who = 'b'"))
	mustOK(t, a.eval("var who = 'a'", js))
	mustOK(t, b.eval("var who = 'b'", js))
	pids := []int{a.pidOf(Python), a.pidOf(JavaScript)}
	a.run.End(orchestrator.EndStopped)
	for _, pid := range pids {
		waitGone(t, pid)
	}
	if got := mustOK(t, b.eval("who")); got != "'b'" {
		t.Errorf("run b's python kernel: %s", got)
	}
	if got := mustOK(t, b.eval("who", js)); got != "'b'" {
		t.Errorf("run b's javascript kernel: %s", got)
	}
}

// TestRunEndsDuringToolCall: a tool() call whose harness never answers
// does not hold the run's end: the kernel dies, the call's context ends,
// and nothing is left waiting.
func TestRunEndsDuringToolCall(t *testing.T) {
	for _, lang := range []string{Python, JavaScript} {
		t.Run(lang, func(t *testing.T) {
			noLeaks(t)
			asked := make(chan struct{})
			var once sync.Once
			h := &testHarness{answer: func(ctx context.Context, c orchestrator.ToolCall) (*orchestrator.Result, error) {
				once.Do(func() { close(asked) })
				<-ctx.Done() // never answers of its own accord
				return nil, ctx.Err()
			}}
			e := newEnv(t, testConfig(), h)
			pid := e.pidOf(lang)
			code := "tool('subagent', {})"
			if lang == JavaScript {
				code = "await tool('subagent', {})"
			}
			done := make(chan error)
			go func() {
				raw := fmt.Sprintf(`{"code":%q,"description":"call a tool that never answers","language":%q}`, code, lang)
				_, err := e.reg.Call(context.Background(), e.run, orchestrator.SurfaceFull, "eval", []byte(raw))
				done <- err
			}()
			select {
			case <-asked:
			case <-time.After(10 * time.Second):
				t.Fatal("the harness never saw the tool() call")
			}
			e.run.End(orchestrator.EndStopped)
			select {
			case err := <-done:
				if !errors.Is(err, orchestrator.ErrRunEnded) {
					t.Errorf("the cell's call ended with %v, want the run's end", err)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("the eval call did not return after the run ended")
			}
			waitGone(t, pid)
		})
	}
}

// TestOutputBetweenCells: a thread that prints while no cell runs fills
// the frame queue nobody reads; the next cell gets that output, and a
// reset ends the kernel without leaving its frame reader blocked.
func TestOutputBetweenCells(t *testing.T) {
	noLeaks(t)
	e := newEnv(t, testConfig(), nil)
	pid := e.pidOf(Python)
	mustOK(t, e.eval("import threading, time\ndef chatter():\n    while True:\n        print('tick', flush=True)\n        time.sleep(0.0005)\nthreading.Thread(target=chatter, daemon=True).start()"))
	time.Sleep(1500 * time.Millisecond)
	if got := mustOK(t, e.eval("'next cell'")); !strings.Contains(got, "tick") || !strings.Contains(got, "'next cell'") {
		t.Errorf("the next cell lacks the background output or its value:\n%.500s", got)
	}
	time.Sleep(1500 * time.Millisecond)
	mustOK(t, e.eval("", reset))
	waitGone(t, pid)
}

// TestNodeChildFloodsStdout: node cannot repoint fd 1, so a child started
// with inherited stdio writes beside the frames. 70 MB without a newline,
// more than a frame may hold, is output like any other, alone or
// interleaved with the cell's own frames, and the cell still ends
// normally.
func TestNodeChildFloodsStdout(t *testing.T) {
	noLeaks(t)
	e := newEnv(t, testConfig(), nil)
	for _, tick := range []string{"", "console.log('cell line')"} {
		code := "const { spawn } = require('child_process')\n" +
			"const child = spawn('sh', ['-c', \"head -c 70000000 /dev/zero | tr '\\\\0' x\"], { stdio: 'inherit' })\n" +
			"const t = setInterval(() => { " + tick + " }, 1)\n" +
			"await new Promise(r => child.on('exit', r))\n" +
			"clearInterval(t)\n'after the flood'"
		got := mustOK(t, e.eval(code, js))
		for _, w := range []string{"xxxxxxxx", "'after the flood'", "MB of output cut here"} {
			if !strings.Contains(got, w) {
				t.Errorf("with %q each ms: result lacks %q:\n%.1000s", tick, w, got)
			}
		}
	}
	if got := mustOK(t, e.eval("1 + 1", js)); got != "2" {
		t.Errorf("next cell: %s", got)
	}
}

// TestBigCellAfterChatter: node reads its input on the same thread that
// writes its output, so a kernel blocked writing output printed between
// cells reads a large cell only once Berth reads that output. Berth must
// read while it writes the cell, or both wait for ever.
func TestBigCellAfterChatter(t *testing.T) {
	noLeaks(t)
	e := newEnv(t, testConfig(), nil)
	mustOK(t, e.eval("var chatter = setInterval(() => console.log('x'.repeat(2000)), 0); 'started'", js))
	time.Sleep(time.Second) // the frame queue and the pipe fill up
	big := "var data = '" + strings.Repeat("d", 512<<10) + "'\nclearInterval(chatter)\ndata.length"
	done := make(chan string, 1)
	go func() {
		raw := fmt.Sprintf(`{"code":%q,"description":"run a large cell after chatter","language":"javascript"}`, big)
		res, err := e.reg.Call(context.Background(), e.run, orchestrator.SurfaceFull, "eval", []byte(raw))
		if err != nil {
			done <- err.Error()
			return
		}
		done <- text(res)
	}()
	select {
	case got := <-done:
		if !strings.Contains(got, "524288") {
			t.Errorf("big cell after chatter:\n%.500s", got)
		}
	case <-time.After(20 * time.Second):
		e.run.End(orchestrator.EndStopped) // unblocks the stuck call
		<-done
		t.Fatal("a large cell after output printed between cells hung")
	}
}

// TestAbandonedToolCall: a tool() call still pending when its cell ends is
// cancelled at the harness, and the caller learns why.
func TestAbandonedToolCall(t *testing.T) {
	noLeaks(t)
	h := &testHarness{answer: func(ctx context.Context, c orchestrator.ToolCall) (*orchestrator.Result, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	e := newEnv(t, testConfig(), h)
	mustOK(t, e.eval("import threading\nbox = {}\ndef call():\n    try:\n        tool('slow')\n    except ToolError as e:\n        box['err'] = str(e)\nth = threading.Thread(target=call)\nth.start()"))
	got := mustOK(t, e.eval("th.join(10)\nbox.get('err')"))
	if !strings.Contains(got, "slow: the call was abandoned") || !strings.Contains(got, "await tool() within its cell") {
		t.Errorf("abandoned call: %s", got)
	}
}

// TestToolCallAfterItsCellEnded: a tool() call made after its cell ended,
// by a thread or a timer the cell left behind, is refused at once. It is
// not held by the next cell until that one ends (the cause of a CI flake:
// the thread's call went out just after the cell's done, and the next
// cell, joining the thread, waited the whole join for it).
func TestToolCallAfterItsCellEnded(t *testing.T) {
	noLeaks(t)
	var calls atomic.Int32
	h := &testHarness{answer: func(ctx context.Context, c orchestrator.ToolCall) (*orchestrator.Result, error) {
		calls.Add(1)
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	e := newEnv(t, testConfig(), h)
	t.Run("python thread between cells", func(t *testing.T) {
		mustOK(t, e.eval("import threading, time\nbox = {}\ndef call():\n    time.sleep(0.3)\n    try:\n        tool('slow')\n    except ToolError as e:\n        box['err'] = str(e)\nth = threading.Thread(target=call)\nth.start()"))
		time.Sleep(time.Second) // the thread calls while no cell runs
		start := time.Now()
		got := mustOK(t, e.eval("th.join(10)\nbox.get('err')"))
		if !strings.Contains(got, "slow: the call was abandoned: the cell that made it had ended") {
			t.Errorf("call between cells: %s", got)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("the next cell waited %v for a call it did not make", d)
		}
	})
	t.Run("javascript timer read by the next cell", func(t *testing.T) {
		// node sends the call with the ended cell's id; it waits in the
		// frame queue until the next cell reads it.
		mustOK(t, e.eval("globalThis.err = 'none'; setTimeout(() => tool('slow').catch(e => { globalThis.err = e.message }), 200); 'armed'", js))
		time.Sleep(time.Second)
		got := mustOK(t, e.eval("await new Promise(r => setTimeout(r, 500)); globalThis.err", js))
		if !strings.Contains(got, "slow: the call was abandoned: the cell that made it had ended") {
			t.Errorf("a timer's call after its cell: %s", got)
		}
	})
	if n := calls.Load(); n != 0 {
		t.Errorf("the harness got %d calls made after their cells ended, want 0", n)
	}
}

// TestBackgroundFlood: a cell that leaves a process flooding stdout still
// ends: its output is what was written up to its end, not all there will
// ever be. The reset then stops the flood with its kernel.
func TestBackgroundFlood(t *testing.T) {
	noLeaks(t)
	e := newEnv(t, testConfig(), nil)
	start := time.Now()
	got := mustOK(t, e.eval("import subprocess\nfloods = [subprocess.Popen(['yes']) for _ in range(4)]\nimport time\ntime.sleep(0.2)\n'cell ended'"))
	if !strings.Contains(got, "y\ny\n") || !strings.HasSuffix(got, "'cell ended'") {
		t.Errorf("cell beside a flood:\n%.300s", got)
	}
	// Not a speed check: a drain that chases the flood ends only when the
	// pipe happens to be empty, which took 16 s under -race before.
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the cell took %s to end beside a flood", took)
	}
	mustOK(t, e.eval("'fresh'", reset))
}
