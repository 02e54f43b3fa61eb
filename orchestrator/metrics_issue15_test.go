package orchestrator_test

import (
	"context"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Issue 15 item 1: a session ended by its run's end says why the run
// ended when that is a disconnect or a shutdown, so SREs can tell a
// harness that went away from one that stopped its runs.
func TestIssue15Item1SessionEndReasonFollowsTheRun(t *testing.T) {
	for runReason, want := range map[string]string{
		orchestrator.EndDisconnect: metrics.ReasonDisconnected,
		orchestrator.EndShutdown:   metrics.ReasonShutdown,
		orchestrator.EndStopped:    metrics.ReasonRunEnded,
		orchestrator.EndIdle:       metrics.ReasonRunEnded,
	} {
		rs := orchestrator.NewRuns(metrics.NewForTest(), time.Hour)
		run, err := rs.Start(context.Background(), orchestrator.StartParams{Workdir: t.TempDir(), Owner: t})
		if err != nil {
			t.Fatal(err)
		}
		var got string
		run.OnEnd(func() { got = run.SessionEndReason() })
		switch runReason {
		case orchestrator.EndShutdown:
			rs.StopAll()
		default:
			rs.EndOwnedBy(t, runReason)
		}
		if got != want {
			t.Errorf("a run ended as %q gives its sessions %q, want %q", runReason, got, want)
		}
	}
}

// Issue 15 item 1: the run's enclosure is wrapped so that process starts
// are timed by driver whatever the driver.
func TestIssue15Item1RunsTimeTheirEnclosure(t *testing.T) {
	m := metrics.NewForTest()
	rs := orchestrator.NewRuns(m, time.Hour)
	run, err := rs.Start(context.Background(), orchestrator.StartParams{Workdir: t.TempDir(), Owner: t})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.StopAll()
	if _, err := run.Enclosure.Start(context.Background(), enclosure.Cmd{Path: "/nonexistent/berth-none"}); err == nil {
		t.Fatal("a missing binary started")
	}
	if got := testutil.ToFloat64(m.EnclosureErrors.WithLabelValues(metrics.DriverHost, metrics.OpStart)); got != 1 {
		t.Errorf("enclosure errors{host,start} = %v after a failed start, want 1", got)
	}
}
