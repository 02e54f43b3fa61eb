package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Two sets of collectors live side by side: nothing is registered
// globally.
func TestNoGlobalRegistry(t *testing.T) {
	a, b := prometheus.NewRegistry(), prometheus.NewRegistry()
	New(a, "v1")
	New(b, "v2")
	own := strings.Join(names(t, a), " ")
	for _, want := range []string{"berth_build_info", "berth_runs_active", "berth_reaper_last_run_timestamp_seconds", "berth_questions_pending", "go_goroutines", "process_open_fds"} {
		if !strings.Contains(own, want) {
			t.Errorf("registry lacks %s: %s", want, own)
		}
	}
	for _, name := range names(t, prometheus.DefaultGatherer) {
		if strings.HasPrefix(name, "berth_") {
			t.Errorf("%s is on the global registry", name)
		}
	}
}

// names lists the metric families a gatherer serves.
func names(t *testing.T, g prometheus.Gatherer) []string {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range families {
		out = append(out, f.GetName())
	}
	return out
}

func TestBuildInfoAndSessionHelpers(t *testing.T) {
	m := New(prometheus.NewRegistry(), "v1.2.3")
	if n := testutil.CollectAndCount(m.BuildInfo); n != 1 {
		t.Fatalf("berth_build_info has %d series, want 1", n)
	}
	m.SessionStarted(KindWorker, DriverHost)
	m.SessionStarted(KindWorker, DriverHost)
	m.SessionFailed(KindWorker)
	m.SessionEnded(KindWorker, DriverHost, ReasonStopped)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"sessions_active{worker,host}", testutil.ToFloat64(m.SessionsActive.WithLabelValues(KindWorker, DriverHost)), 1},
		{"session_starts_total{worker,ok}", testutil.ToFloat64(m.SessionStarts.WithLabelValues(KindWorker, "ok")), 2},
		{"session_starts_total{worker,error}", testutil.ToFloat64(m.SessionStarts.WithLabelValues(KindWorker, "error")), 1},
		{"session_ends_total{worker,stopped}", testutil.ToFloat64(m.SessionEnds.WithLabelValues(KindWorker, ReasonStopped)), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

// Issue 15 item 1: every label value that can appear exists at zero from
// the start, so rate() and absent() work from the first scrape.
func TestLabelValuesStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "v")
	m.KnowTool("eval", "exec")
	m.KnowLSPServer("gopls")
	series := map[string]int{}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		series[f.GetName()] = len(f.GetMetric())
		if !strings.Contains(f.GetHelp(), "second") && !strings.Contains(f.GetHelp(), "count") && strings.HasPrefix(f.GetName(), "berth_") && f.GetName() != "berth_build_info" {
			t.Errorf("%s: help %q names no unit", f.GetName(), f.GetHelp())
		}
	}
	for name, want := range map[string]int{
		"berth_sessions_active":                 len(Kinds) * len(Drivers),
		"berth_session_starts_total":            len(Kinds) * 2,
		"berth_session_ends_total":              len(Kinds) * len(Reasons),
		"berth_idle_timeouts_total":             len(Kinds),
		"berth_ttl_expiries_total":              len(Kinds),
		"berth_cell_interrupts_total":           2,
		"berth_enclosure_exec_duration_seconds": len(Drivers),
		"berth_enclosure_errors_total":          len(Drivers) * len(EnclosureOps),
		"berth_diagnostics_total":               2,
		"berth_rpc_messages_rejected_total":     len(RejectReasons),
		"berth_rpc_connections_active":          len(Transports),
		"berth_tool_calls_total":                len(ToolOutcomes),
		"berth_tool_call_duration_seconds":      1,
		"berth_lsp_server_restarts_total":       1,
		"berth_bridge_calls_in_flight":          1,
		"berth_bridge_call_duration_seconds":    1,
		"berth_stuck_calls":                     1,
	} {
		if series[name] != want {
			t.Errorf("%s has %d series at start, want %d", name, series[name], want)
		}
	}
}

// Issue 15 item 1: an idle timeout or a TTL expiry is counted on its own
// as well as among the ends, so an alert need not know the reason label.
func TestIdleAndTTLEndsAreCountedOnTheirOwn(t *testing.T) {
	m := NewForTest()
	m.SessionStarted(KindKernel, DriverDocker)
	m.SessionStarted(KindDebug, DriverHost)
	m.SessionEnded(KindKernel, DriverDocker, ReasonIdle)
	m.SessionEnded(KindDebug, DriverHost, ReasonTTL)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"idle_timeouts{kernel}", testutil.ToFloat64(m.IdleTimeouts.WithLabelValues(KindKernel)), 1},
		{"ttl_expiries{debug}", testutil.ToFloat64(m.TTLExpiries.WithLabelValues(KindDebug)), 1},
		{"ttl_expiries{kernel}", testutil.ToFloat64(m.TTLExpiries.WithLabelValues(KindKernel)), 0},
		{"session_ends{kernel,idle}", testutil.ToFloat64(m.SessionEnds.WithLabelValues(KindKernel, ReasonIdle)), 1},
		{"sessions_active{kernel,docker}", testutil.ToFloat64(m.SessionsActive.WithLabelValues(KindKernel, DriverDocker)), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	done := m.BridgeCall()
	if v := testutil.ToFloat64(m.BridgeCallsInFlight); v != 1 {
		t.Errorf("bridge calls in flight = %v during a call, want 1", v)
	}
	done()
	if v := testutil.ToFloat64(m.BridgeCallsInFlight); v != 0 {
		t.Errorf("bridge calls in flight = %v after it, want 0", v)
	}
}
