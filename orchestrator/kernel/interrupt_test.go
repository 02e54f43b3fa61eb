package kernel

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/internal/procfs"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

// noSignals is the host enclosure with signals taken away, as an
// enclosure that can only pipe (a container exec) would be: a fake beside
// the real one, to make eval fall back to the interrupt frame.
type noSignals struct{ enclosure.Enclosure }

func (n noSignals) Start(ctx context.Context, c enclosure.Cmd) (enclosure.Process, error) {
	p, err := n.Enclosure.Start(ctx, c)
	if err != nil {
		return nil, err
	}
	return noSignalProcess{p}, nil
}

type noSignalProcess struct{ enclosure.Process }

func (noSignalProcess) Signal(os.Signal) error { return enclosure.ErrNotSupported }

func TestInterruptFrame(t *testing.T) {
	cfg := testConfig()
	cfg.CellIdleBudget = 500 * time.Millisecond
	tests := []struct {
		lang, code, want string
	}{
		{Python, "import time\ntime.sleep(30)", "KeyboardInterrupt"},
		{JavaScript, "await new Promise(() => {})", "Interrupted"},
	}
	for _, tt := range tests {
		t.Run(tt.lang, func(t *testing.T) {
			dir := t.TempDir()
			reg := orchestrator.NewRegistry(metrics.NewForTest(), 0)
			reg.Add(New(cfg, reg.Metrics()))
			run := orchestrator.NewRun("run", "conv", dir, noSignals{host.New()}, &testHarness{}, nil)
			t.Cleanup(func() { run.End(orchestrator.EndStopped) })
			e := &env{t: t, reg: reg, run: run, dir: dir}
			opt := func(a map[string]any) { a["language"] = tt.lang }
			r := e.eval(tt.code, opt)
			if !r.IsError || !strings.Contains(text(r), tt.want) || !strings.Contains(text(r), "intact") {
				t.Fatalf("interrupt by frame:\n%s", text(r))
			}
		})
	}
}

// TestDiedBetweenCells: a kernel that dies while no cell runs is replaced
// on the next call, which says so.
func TestDiedBetweenCells(t *testing.T) {
	e := newEnv(t, testConfig(), nil)
	pid := e.pidOf(Python)
	mustOK(t, e.eval("import threading, os\nthreading.Timer(0.1, lambda: os._exit(5)).start()"))
	waitGone(t, pid)
	e.waitSeenExit(Python)
	got := mustOK(t, e.eval("'fresh'"))
	for _, w := range []string{"'fresh'", "had died since the last cell", "exited with status 5"} {
		if !strings.Contains(got, w) {
			t.Errorf("result lacks %q:\n%s", w, got)
		}
	}
}

// strayCell starts what a runaway cell leaves (issue 24 item 7: a fork
// bomb's children outlived an interrupt that reported the kernel intact),
// bounded: 40 sleepers in the kernel's group that ignore SIGINT (a
// shell's background jobs), 5 forked copies of the kernel that ignore it
// too (os.fork, a fork bomb's way) and 5
// sleepers that left the group and the session (setsid), whose shell has
// exited; then it waits, silent, for the idle budget.
const strayCell = `import os, signal, subprocess, time
subprocess.Popen(['/bin/sh', '-c', 'for i in $(seq 40); do sleep 300 & done'], stdout=subprocess.DEVNULL).wait()
subprocess.Popen(['/bin/sh', '-c', 'for i in $(seq 5); do setsid sleep 301 & done'], stdout=subprocess.DEVNULL).wait()
for i in range(5):
    if os.fork() == 0:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        while True:
            time.sleep(1)
print('started', flush=True)
time.sleep(60)`

// strayCellJS is strayCell's shell part from a JavaScript cell.
const strayCellJS = `const cp = require('child_process');
cp.spawnSync('/bin/sh', ['-c', 'for i in $(seq 40); do sleep 300 & done; for i in $(seq 5); do setsid sleep 301 & done'], {stdio: 'ignore'});
console.log('started');
await new Promise(() => {});`

// TestInterruptEndsTheCellsStrayProcesses: an interrupted cell's kernel
// lives on with its state, and every process the cell started is ended
// before the result says so, those that left the group included (the
// relay adopts them); a process an earlier cell started (one that
// ignores the interrupt, as the group gets it) is left running: the
// drivers tell them apart by start time, to the clock tick (10 ms), so
// that cell waits 100 ms before it ends.
func TestInterruptEndsTheCellsStrayProcesses(t *testing.T) {
	cfg := testConfig()
	cfg.CellIdleBudget = time.Second
	for _, tt := range []struct {
		name, lang, code, earlier string
		want                      int
		frame                     bool // interrupt by frame, as where no signal can be sent
	}{
		{Python, Python, strayCell, "import subprocess, time\nkept = subprocess.Popen(['/bin/sh', '-c', 'trap \"\" INT; exec sleep 302'])\nx = 42\ntime.sleep(0.1)", 50, false},
		{"python by frame", Python, strayCell, "import subprocess, time\nkept = subprocess.Popen(['/bin/sh', '-c', 'trap \"\" INT; exec sleep 302'])\nx = 42\ntime.sleep(0.1)", 50, true},
		{JavaScript, JavaScript, strayCellJS, "const kept = require('child_process').spawn('/bin/sh', ['-c', 'trap \"\" INT; exec sleep 302'], {stdio: 'ignore'}); var x = 42; await new Promise(r => setTimeout(r, 100))", 45, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var enc enclosure.Enclosure = host.New()
			if tt.frame {
				enc = noSignals{enc}
			}
			e := newEnvOn(t, cfg, nil, t.TempDir(), enc)
			opt := func(a map[string]any) { a["language"] = tt.lang }
			pid := e.pidOf(tt.lang)
			mustOK(t, e.eval(tt.earlier, opt))
			earlier := strays(pid)
			if len(earlier) != 1 {
				t.Fatalf("the earlier cell left %d processes, want its 1 sleeper: %v", len(earlier), earlier)
			}
			r := e.eval(tt.code, opt)
			got := checkResult(t, r, true, []string{"started", "intact", fmt.Sprintf("ended %d processes", tt.want)}, nil)
			left := strays(pid)
			t.Logf("processes the interrupted cell left: %d (its earlier cell's sleeper kept: %v)", len(left)-1, slices.Equal(left, earlier))
			if !slices.Equal(left, earlier) {
				t.Errorf("after the interrupt %d processes of the kernel's are left, want only the earlier cell's %v: %v\nresult:\n%s", len(left), earlier, left, got)
			}
			if got := mustOK(t, e.eval("x", opt)); got != "42" {
				t.Errorf("the kernel's state after the interrupt: x = %s", got)
			}
			if e.pidOf(tt.lang) != pid {
				t.Error("the kernel was replaced")
			}
		})
	}
}

// strays lists the live processes of a kernel's tree but the kernel: the
// relay's other descendants (the relay adopts orphans) and the members of
// the kernel's process group.
func strays(kernel int) []string {
	k, ok := procfs.Read(kernel)
	if !ok {
		return nil
	}
	var out []string
	seen := map[int]bool{kernel: true}
	add := func(pid int) {
		if p, ok := procfs.Read(pid); ok && p.Live() && !seen[pid] {
			seen[pid] = true
			out = append(out, p.String())
		}
	}
	for _, pid := range procfs.Descendants(k.PPID) {
		add(pid)
	}
	for _, p := range procfs.Filter(func(p procfs.Process) bool { return p.PGID == kernel }) {
		add(p.PID)
	}
	slices.Sort(out)
	return out
}

// TestInterruptEndsProcessesThatKeepForking: an interrupted cell whose
// processes go on forking while they are killed, a fork bomb's way but
// bounded (5 loops that ignore SIGINT, each starting a sleeper every
// 100 ms), leaves none of them: the driver kills until a pass finds none.
func TestInterruptEndsProcessesThatKeepForking(t *testing.T) {
	cfg := testConfig()
	cfg.CellIdleBudget = time.Second
	e := newEnv(t, cfg, nil)
	pid := e.pidOf(Python)
	code := `import subprocess, time
loop = 'trap "" INT; while :; do sleep 303 & sleep 0.1; done'
for i in range(5):
    subprocess.Popen(['/bin/sh', '-c', loop], stdout=subprocess.DEVNULL)
print('forking', flush=True)
time.sleep(60)`
	got := checkResult(t, e.eval(code), true, []string{"forking", "intact", "processes the interrupted cell had started"}, []string{"could not be ended"})
	// What a loop started as it was killed would show within a moment.
	time.Sleep(300 * time.Millisecond)
	if left := strays(pid); len(left) != 0 {
		t.Errorf("%d processes left after the interrupt: %v\nresult:\n%s", len(left), left, got)
	}
	t.Logf("result: %s", got)
}
