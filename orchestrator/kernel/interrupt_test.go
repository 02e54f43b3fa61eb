package kernel

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/host"
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
