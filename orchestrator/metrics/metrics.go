// Package metrics declares every Prometheus metric Berth exports, in one
// place, as a struct of collectors built from a Registerer. There is no
// global registry and nothing registers itself at import: a test or a
// second server builds its own.
//
// Labels are bounded: never a run, conversation or container id.
package metrics

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Session kinds and end reasons used as label values.
const (
	KindLSP    = "lsp"
	KindDebug  = "debug"
	KindKernel = "kernel"
	KindWorker = "worker"

	ReasonIdle     = "idle"
	ReasonTTL      = "ttl"
	ReasonStopped  = "stopped"
	ReasonCrashed  = "crashed"
	ReasonRunEnded = "run_ended"
)

// Metrics holds Berth's collectors.
type Metrics struct {
	RunsActive       prometheus.Gauge
	SessionsActive   *prometheus.GaugeVec   // kind
	SessionStarts    *prometheus.CounterVec // kind, outcome (ok, error)
	SessionEnds      *prometheus.CounterVec // kind, reason
	ToolCalls        *prometheus.CounterVec // tool, tier, outcome (ok, error, refused, invalid, panic, timeout, canceled)
	ToolCallDuration *prometheus.HistogramVec
	// StuckCalls counts tool calls that were answered at their deadline
	// or cancellation while their tool's work went on, until that work
	// returns: work that ignores its context (a read that blocks for
	// ever) shows here instead of hanging its call.
	StuckCalls           prometheus.Gauge
	BridgeCallsInFlight  prometheus.Gauge
	Diagnostics          *prometheus.CounterVec // disposition (new, suppressed)
	QuestionsPending     prometheus.Gauge
	ReaperLastRun        prometheus.Gauge
	BuildInfo            *prometheus.GaugeVec
	RPCMessagesRejected  *prometheus.CounterVec // reason
	RPCConnectionsActive *prometheus.GaugeVec   // transport
	// LSPRequestDuration is how long language servers take to answer
	// the requests tools make, so a slow tool call can be told apart
	// from a slow server.
	LSPRequestDuration *prometheus.HistogramVec // server, method
}

// New builds the collectors and registers them, with the Go and process
// collectors, on reg. version is the build's version for berth_build_info.
func New(reg prometheus.Registerer, version string) *Metrics {
	m := &Metrics{
		RunsActive: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_runs_active", Help: "Runs currently live.",
		}),
		SessionsActive: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_sessions_active", Help: "Live sessions (language servers, debug sessions, kernels, workers) by kind.",
		}, []string{"kind"}),
		SessionStarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_session_starts_total", Help: "Session starts by kind and outcome.",
		}, []string{"kind", "outcome"}),
		SessionEnds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_session_ends_total", Help: "Session ends by kind and reason (idle, ttl, stopped, crashed, run_ended).",
		}, []string{"kind", "reason"}),
		ToolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_tool_calls_total", Help: "Tool calls by tool, tier and outcome.",
		}, []string{"tool", "tier", "outcome"}),
		ToolCallDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "berth_tool_call_duration_seconds",
			Help:    "Tool call duration in seconds.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"tool", "tier"}),
		StuckCalls: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_stuck_calls", Help: "Tool calls answered at their deadline or cancellation whose work has not returned yet.",
		}),
		BridgeCallsInFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_bridge_calls_in_flight", Help: "tool() re-entry calls from kernels waiting on the harness.",
		}),
		Diagnostics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_diagnostics_total", Help: "Diagnostics seen on write, by disposition (new, suppressed).",
		}, []string{"disposition"}),
		QuestionsPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_questions_pending", Help: "ask_user cards waiting for a human.",
		}),
		ReaperLastRun: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_reaper_last_run_timestamp_seconds", Help: "Unix time of the idle-run reaper's last pass.",
		}),
		BuildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_build_info", Help: "Always 1; labels carry the build's version and Go version.",
		}, []string{"version", "goversion"}),
		RPCMessagesRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_rpc_messages_rejected_total", Help: "Harness protocol messages rejected, by reason (parse, invalid, too_large, unauthorized).",
		}, []string{"reason"}),
		RPCConnectionsActive: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_rpc_connections_active", Help: "Open harness connections by transport.",
		}, []string{"transport"}),
		LSPRequestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "berth_lsp_request_duration_seconds",
			Help:    "Language-server request duration in seconds, by server and LSP method, each attempt on its own.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"server", "method"}),
	}
	m.BuildInfo.WithLabelValues(version, runtime.Version()).Set(1)
	reg.MustRegister(m.RunsActive, m.SessionsActive, m.SessionStarts, m.SessionEnds, m.ToolCalls,
		m.ToolCallDuration, m.StuckCalls, m.BridgeCallsInFlight, m.Diagnostics, m.QuestionsPending,
		m.ReaperLastRun, m.BuildInfo, m.RPCMessagesRejected, m.RPCConnectionsActive, m.LSPRequestDuration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// NewForTest builds collectors on a fresh registry, for tests and tools
// that need a *Metrics but serve none.
func NewForTest() *Metrics { return New(prometheus.NewRegistry(), "test") }

// SessionStarted records a session start and counts it active.
func (m *Metrics) SessionStarted(kind string) {
	m.SessionStarts.WithLabelValues(kind, "ok").Inc()
	m.SessionsActive.WithLabelValues(kind).Inc()
}

// SessionFailed records a session that failed to start.
func (m *Metrics) SessionFailed(kind string) { m.SessionStarts.WithLabelValues(kind, "error").Inc() }

// SessionEnded records a session end with its reason and counts it inactive.
func (m *Metrics) SessionEnded(kind, reason string) {
	m.SessionEnds.WithLabelValues(kind, reason).Inc()
	m.SessionsActive.WithLabelValues(kind).Dec()
}
