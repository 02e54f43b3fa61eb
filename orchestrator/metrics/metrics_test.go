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
	m.SessionStarted(KindWorker)
	m.SessionStarted(KindWorker)
	m.SessionFailed(KindWorker)
	m.SessionEnded(KindWorker, ReasonStopped)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"sessions_active{worker}", testutil.ToFloat64(m.SessionsActive.WithLabelValues(KindWorker)), 1},
		{"session_starts_total{worker,ok}", testutil.ToFloat64(m.SessionStarts.WithLabelValues(KindWorker, "ok")), 2},
		{"session_starts_total{worker,error}", testutil.ToFloat64(m.SessionStarts.WithLabelValues(KindWorker, "error")), 1},
		{"session_ends_total{worker,stopped}", testutil.ToFloat64(m.SessionEnds.WithLabelValues(KindWorker, ReasonStopped)), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}
