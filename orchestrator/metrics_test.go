package orchestrator_test

import (
	"context"
	"encoding/json"
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
func TestSessionEndReasonFollowsTheRun(t *testing.T) {
	for runReason, want := range map[string]string{
		orchestrator.EndDisconnect: metrics.ReasonDisconnected,
		orchestrator.EndShutdown:   metrics.ReasonShutdown,
		orchestrator.EndStopped:    metrics.ReasonRunEnded,
		orchestrator.EndIdle:       metrics.ReasonRunEnded,
	} {
		rs := orchestrator.NewRuns(metrics.NewForTest(), time.Hour, hostOnly())
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
func TestRunsTimeTheirEnclosuresProcessStarts(t *testing.T) {
	m := metrics.NewForTest()
	rs := orchestrator.NewRuns(m, time.Hour, hostOnly())
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

// Issue 15 item 1: a provider's tools have their series from the moment
// it is added, before any run lists or calls them.
func TestToolSeriesExistOnceTheProviderIsAdded(t *testing.T) {
	m := metrics.NewForTest()
	reg := orchestrator.NewRegistry(m, 0)
	reg.Add(namedProvider{})
	if n := testutil.CollectAndCount(m.ToolCalls); n != len(metrics.ToolOutcomes) {
		t.Errorf("berth_tool_calls_total has %d series after Add, want %d (one per outcome)", n, len(metrics.ToolOutcomes))
	}
	if n := testutil.CollectAndCount(m.ToolCallDuration); n != 1 {
		t.Errorf("berth_tool_call_duration_seconds has %d series after Add, want 1", n)
	}
}

// namedProvider offers one tool to runs with a workdir and conversation,
// as the real providers do.
type namedProvider struct{}

func (namedProvider) Feature() string { return orchestrator.FeatureStructural }
func (namedProvider) Tools(run *orchestrator.Run) []orchestrator.Tool {
	if run.Workdir == "" || run.ConversationID == "" {
		return nil
	}
	return []orchestrator.Tool{namedTool{}}
}

type namedTool struct{}

func (namedTool) Spec() orchestrator.Spec {
	return orchestrator.Spec{Name: "named", Tier: orchestrator.Read, Description: "a tool with a name"}
}
func (namedTool) Call(context.Context, *orchestrator.Run, json.RawMessage) (*orchestrator.Result, error) {
	return orchestrator.Text("ok"), nil
}
