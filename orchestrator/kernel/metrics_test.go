package kernel

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/orchestrator/metrics"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Issue 15 item 1: a kernel Berth stops for breaking the protocol (a
// frame over the limit) ends with reason error, not crashed: it did not
// die on its own.
func TestOversizedFrameEndsWithReasonError(t *testing.T) {
	noLeaks(t)
	e := newEnv(t, testConfig(), nil)
	if r := e.eval("display({'image/png': 'A' * (65 << 20)}, raw=True)"); !r.IsError {
		t.Fatalf("an oversized frame is not an error: %s", text(r))
	}
	m := e.reg.Metrics()
	if n := testutil.ToFloat64(m.SessionEnds.WithLabelValues(metrics.KindKernel, metrics.ReasonError)); n != 1 {
		t.Errorf("kernel ends (error) = %v, want 1", n)
	}
	if n := testutil.ToFloat64(m.SessionEnds.WithLabelValues(metrics.KindKernel, metrics.ReasonCrashed)); n != 0 {
		t.Errorf("kernel ends (crashed) = %v, want 0", n)
	}
}

// Issue 15 item 1: a cell interrupted for its idle budget is counted by
// how it ended.
func TestCellInterruptIsCountedByHowItEnded(t *testing.T) {
	noLeaks(t)
	cfg := testConfig()
	cfg.CellIdleBudget = time.Second
	e := newEnv(t, cfg, nil)
	if r := e.eval("import time\ntime.sleep(60)"); !r.IsError {
		t.Fatalf("a silent cell past its budget is not an error: %s", text(r))
	}
	if n := testutil.ToFloat64(e.reg.Metrics().CellInterrupts.WithLabelValues(metrics.InterruptInterrupted)); n != 1 {
		t.Errorf("cell interrupts (interrupted) = %v, want 1", n)
	}
}
