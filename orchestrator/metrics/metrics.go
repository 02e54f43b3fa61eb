// Package metrics declares every Prometheus metric Berth exports, in one
// place, as a struct of collectors built from a Registerer. There is no
// global registry and nothing registers itself at import: a test or a
// second server builds its own.
//
// Labels are bounded: never a run, conversation or container id. Every
// label value that can appear is created at zero when the collectors are
// built (as JupyterHub does), so rate() and absent() work from the first
// scrape instead of missing the first increment of a series.
package metrics

import (
	"runtime"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Session kinds, end reasons and other label values.
const (
	KindLSP    = "lsp"
	KindDebug  = "debug"
	KindKernel = "kernel"
	KindWorker = "worker"

	ReasonIdle         = "idle"         // its own idle timeout (kernels.idle_timeout)
	ReasonTTL          = "ttl"          // its time to live (debug.session_ttl)
	ReasonStopped      = "stopped"      // on request, or its program ended
	ReasonCrashed      = "crashed"      // its process died on its own
	ReasonError        = "error"        // Berth ended it after an error on it
	ReasonRunEnded     = "run_ended"    // its run was stopped, or idle
	ReasonDisconnected = "disconnected" // its run's connection went away
	ReasonShutdown     = "shutdown"     // Berth is stopping

	DriverHost       = "host"
	DriverDocker     = "docker"
	DriverContainerd = "containerd"
	DriverKubernetes = "kubernetes"

	InterruptInterrupted = "interrupted" // the cell stopped within its grace
	InterruptKilled      = "killed"      // it did not: its kernel was killed

	// Outcomes of a kept process a Berth found in its state directory
	// at start (berth_reattaches_total).
	ReattachResumed   = "resumed"   // taken back, then given back to its run by run/start
	ReattachUnclaimed = "unclaimed" // taken back, but no run/start claimed it within runs.disconnect_grace, or its run could not be given it (a debug session past its TTL): ended
	ReattachStopped   = "stopped"   // taken back and ended: no Berth resumes a process of its kind yet
	ReattachLost      = "lost"      // its relay did not answer (or refused the record's token), or its container cannot be attached: record removed
	ReattachExpired   = "expired"   // its relay had ended it, no Berth having come back within enclosure.reattach_grace
	ReattachParked    = "parked"    // taken back and parked for the next run on its enclosure and root (a language server)
	// How a run's language server came to it
	// (berth_lsp_server_starts_total{how}).
	LSPCold    = "cold"    // started from nothing
	LSPAdopted = "adopted" // a server parked by an earlier run on the same enclosure and root

	// Why a parked language server ended (berth_lsp_parked_ends_total{reason}).
	ParkedExpired  = "expired"  // it was parked for lsp.keep_warm
	ParkedCapped   = "capped"   // the oldest past lsp.max_parked or lsp.max_parked_per_enclosure
	ParkedMemory   = "memory"   // the oldest past lsp.max_parked_rss_bytes
	ParkedExited   = "exited"   // its process ended while parked (a crash, its container stopped)
	ParkedShutdown = "shutdown" // Berth stopped

	OpAttach   = "attach"   // run/start attaching to the enclosure
	OpStart    = "start"    // starting a process in it
	OpDial     = "dial"     // connecting to a port in it
	OpLookPath = "lookpath" // resolving an executable in it
)

// The label values created at zero. Kinds, Drivers and the others are
// every value their label takes.
var (
	Kinds             = []string{KindLSP, KindDebug, KindKernel, KindWorker}
	Drivers           = []string{DriverHost, DriverDocker, DriverContainerd, DriverKubernetes}
	Reasons           = []string{ReasonIdle, ReasonTTL, ReasonStopped, ReasonCrashed, ReasonError, ReasonRunEnded, ReasonDisconnected, ReasonShutdown}
	InterruptOutcomes = []string{InterruptInterrupted, InterruptKilled}
	EnclosureOps      = []string{OpAttach, OpStart, OpDial, OpLookPath}
	StartOutcomes     = []string{"ok", "error"}
	ReattachOutcomes  = []string{ReattachResumed, ReattachParked, ReattachUnclaimed, ReattachStopped, ReattachLost, ReattachExpired}
	LSPStartKinds     = []string{LSPCold, LSPAdopted}
	ParkedEndReasons  = []string{ParkedExpired, ParkedCapped, ParkedMemory, ParkedExited, ParkedShutdown}
	// ToolOutcomes are berth_tool_calls_total's outcome values.
	ToolOutcomes     = []string{"ok", "error", "refused", "invalid", "panic", "timeout", "canceled"}
	RejectReasons    = []string{"parse", "invalid", "too_large", "unauthorized"}
	Transports       = []string{"stdio", "unix", "websocket"}
	Dispositions     = []string{"new", "suppressed"}
	durationBuckets  = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}
	lspBuckets       = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	enclosureBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
)

// Metrics holds Berth's collectors.
type Metrics struct {
	RunsActive       prometheus.Gauge
	SessionsActive   *prometheus.GaugeVec   // kind, driver
	SessionStarts    *prometheus.CounterVec // kind, outcome (ok, error)
	SessionEnds      *prometheus.CounterVec // kind, reason
	IdleTimeouts     *prometheus.CounterVec // kind
	TTLExpiries      *prometheus.CounterVec // kind
	CellInterrupts   *prometheus.CounterVec // outcome (interrupted, killed)
	ToolCalls        *prometheus.CounterVec // tool, tier, outcome (ok, error, refused, invalid, panic, timeout, canceled)
	ToolCallDuration *prometheus.HistogramVec
	// StuckCalls counts tool calls that were answered at their deadline
	// or cancellation while their tool's work went on, until that work
	// returns: work that ignores its context (a read that blocks for
	// ever) shows here instead of hanging its call.
	StuckCalls           prometheus.Gauge
	BridgeCallsInFlight  prometheus.Gauge
	BridgeCallDuration   prometheus.Histogram
	EnclosureExec        *prometheus.HistogramVec // driver
	EnclosureErrors      *prometheus.CounterVec   // driver, op
	Diagnostics          *prometheus.CounterVec   // disposition (new, suppressed)
	QuestionsPending     prometheus.Gauge
	ReaperLastRun        prometheus.Gauge
	BuildInfo            *prometheus.GaugeVec
	RPCMessagesRejected  *prometheus.CounterVec // reason
	RPCConnectionsActive *prometheus.GaugeVec   // transport
	// LSPRequestDuration is how long language servers take to answer
	// the requests tools make, so a slow tool call can be told apart
	// from a slow server.
	LSPRequestDuration *prometheus.HistogramVec // server, method
	LSPServerRestarts  *prometheus.CounterVec   // server
	// Reattaches counts what became of each kept process a Berth found
	// in its state directory at start (issue 29): its relays' fate after
	// a restart, "expired" being relays that timed out waiting.
	Reattaches *prometheus.CounterVec // kind, outcome
	// Restarts counts a Berth's start on a state directory that a Berth
	// before it held, by how that one ended: handoff (in order, SIGUSR2)
	// or crash (without stopping: kill -9, an OOM kill, a crash).
	Restarts *prometheus.CounterVec // how
	// LSPServerStarts counts the language servers runs got, by how:
	// started cold, or adopted from the parked ones.
	LSPServerStarts *prometheus.CounterVec // server, how (cold, adopted)
	// LSPParked is how many language servers are parked now, waiting
	// for the next run on their enclosure and root; LSPParkedRSS their
	// resident memory, as last read.
	LSPParked     *prometheus.GaugeVec // driver
	LSPParkedRSS  prometheus.Gauge
	LSPParkedEnds *prometheus.CounterVec // reason (expired, capped, memory, exited, shutdown)
	// LSPReopened counts the documents runs reopened at run/start in a
	// server they adopted: those the run that parked it had open.
	LSPReopened *prometheus.CounterVec // server
	// LSPWarmUps counts the warm-up queries asked of servers prewarm
	// started cold or adopted (lsp.warm_up).
	LSPWarmUps *prometheus.CounterVec // server
	// DebugPrebuilds counts the prebuilds runs started at run/start (a
	// debug adapter's build ahead of its first launch), by adapter and
	// how each ended; DebugPrebuildsRunning is how many run now, and
	// DebugPrebuildDuration how long those that finished took.
	DebugPrebuilds        *prometheus.CounterVec // adapter, result (done, failed, timeout, cancelled)
	DebugPrebuildsRunning prometheus.Gauge
	DebugPrebuildDuration *prometheus.HistogramVec // adapter
}

// New builds the collectors, creates every label value at zero and
// registers them, with the Go and process collectors, on reg. version is
// the build's version for berth_build_info.
func New(reg prometheus.Registerer, version string) *Metrics {
	m := &Metrics{
		RunsActive: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_runs_active", Help: "Runs currently live (count); up on run/start, down when a run ends for any reason.",
		}),
		SessionsActive: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_sessions_active", Help: "Live sessions (count) by kind (lsp, debug, kernel, worker) and the driver of the enclosure they run in; up when one starts, down when it ends.",
		}, []string{"kind", "driver"}),
		SessionStarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_session_starts_total", Help: "Session starts (count) by kind and outcome (ok, error); moves when a start finishes.",
		}, []string{"kind", "outcome"}),
		SessionEnds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_session_ends_total", Help: "Session ends (count) by kind and reason (idle, ttl, stopped, crashed, error, run_ended, disconnected, shutdown); moves when a live session ends.",
		}, []string{"kind", "reason"}),
		IdleTimeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_idle_timeouts_total", Help: "Sessions ended by their own idle timeout (count) by kind, e.g. a kernel culled after kernels.idle_timeout; also in berth_session_ends_total{reason=\"idle\"}.",
		}, []string{"kind"}),
		TTLExpiries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_ttl_expiries_total", Help: "Sessions ended by their time to live (count) by kind, e.g. a debug session past debug.session_ttl; also in berth_session_ends_total{reason=\"ttl\"}.",
		}, []string{"kind"}),
		CellInterrupts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_cell_interrupts_total", Help: "Eval cells interrupted (count) for their idle budget, timeout or cancellation, by outcome: interrupted (the kernel survived) or killed (it did not stop within the grace).",
		}, []string{"outcome"}),
		ToolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_tool_calls_total", Help: "Tool calls (count) by tool, tier and outcome (ok, error, refused, invalid, panic, timeout, canceled); moves when a call is answered.",
		}, []string{"tool", "tier", "outcome"}),
		ToolCallDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "berth_tool_call_duration_seconds",
			Help:    "Tool call duration in seconds, from dispatch to answer, by tool and tier; observed when a call is answered.",
			Buckets: durationBuckets,
		}, []string{"tool", "tier"}),
		StuckCalls: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_stuck_calls", Help: "Tool calls (count) answered at their deadline or cancellation whose work has not returned yet; down when that work returns.",
		}),
		BridgeCallsInFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_bridge_calls_in_flight", Help: "tool() re-entry calls from kernels (count) waiting on the harness; up when a kernel calls tool(), down when the harness answers.",
		}),
		BridgeCallDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "berth_bridge_call_duration_seconds",
			Help:    "tool() re-entry call duration in seconds, from the kernel's call to the harness's answer; observed when the harness answers or the call is abandoned.",
			Buckets: durationBuckets,
		}),
		EnclosureExec: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "berth_enclosure_exec_duration_seconds",
			Help:    "Time in seconds to start a process in an enclosure (a docker exec, a fork on the host), by driver; observed when the start returns, failed or not.",
			Buckets: enclosureBuckets,
		}, []string{"driver"}),
		EnclosureErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_enclosure_errors_total", Help: "Enclosure operations that failed (count) by driver and op (attach, start, dial, lookpath); moves when one returns an error.",
		}, []string{"driver", "op"}),
		Diagnostics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_diagnostics_total", Help: "Diagnostics seen on write (count), by disposition (new: reported, suppressed: already reported); moves after each observed write.",
		}, []string{"disposition"}),
		QuestionsPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_questions_pending", Help: "ask_user cards (count) waiting for a human; down when answered or abandoned.",
		}),
		ReaperLastRun: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_reaper_last_run_timestamp_seconds", Help: "Unix time in seconds of the idle-run reaper's last pass; set on each pass (every runs.reap_interval).",
		}),
		BuildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_build_info", Help: "Always 1; labels carry the build's version and Go version.",
		}, []string{"version", "goversion"}),
		RPCMessagesRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_rpc_messages_rejected_total", Help: "Harness protocol messages rejected (count), by reason (parse, invalid, too_large, unauthorized); moves on each rejection.",
		}, []string{"reason"}),
		RPCConnectionsActive: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_rpc_connections_active", Help: "Open harness connections (count) by transport; up on connect, down on close.",
		}, []string{"transport"}),
		LSPRequestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "berth_lsp_request_duration_seconds",
			Help:    "Language-server request duration in seconds, by server and LSP method, each attempt on its own; observed when the server answers.",
			Buckets: lspBuckets,
		}, []string{"server", "method"}),
		LSPServerRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_lsp_server_restarts_total", Help: "Language servers restarted after a crash or failed start (count), by server; moves when the restart is launched.",
		}, []string{"server"}),
		Reattaches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_reattaches_total", Help: "Kept processes (count) a Berth found in its state directory at start, by kind and outcome: resumed (given back to their run), unclaimed (no run/start within runs.disconnect_grace: ended), stopped (a kind or enclosure no Berth resumes yet: ended), lost (the relay did not answer), expired (the relay had timed out waiting, enclosure.reattach_grace); moves once per record.",
		}, []string{"kind", "outcome"}),
		Restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_restarts_total", Help: "Starts of a Berth on a state directory a Berth before it held (count), by how that one ended: handoff (it handed off, SIGUSR2) or crash (it went away without stopping: kill -9, an OOM kill, a crash); moves once, at start.",
		}, []string{"how"}),
		LSPServerStarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_lsp_server_starts_total", Help: "Language servers a run got (count), by server and how: cold (started from nothing) or adopted (parked by an earlier run on the same enclosure and root); moves when the server is ready for the run.",
		}, []string{"server", "how"}),
		LSPParked: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_lsp_parked_servers", Help: "Language servers parked now (count), by the driver of their enclosure: their run ended and they wait, up to lsp.keep_warm, for the next run on the same enclosure and root; up when parked, down when adopted or ended.",
		}, []string{"driver"}),
		LSPParkedRSS: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_lsp_parked_rss_bytes", Help: "Resident memory of the parked language servers in bytes, as read when each was parked (a server whose memory cannot be read counts 0); capped by lsp.max_parked_rss_bytes.",
		}),
		LSPParkedEnds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_lsp_parked_ends_total", Help: "Parked language servers ended (count), by reason: expired (lsp.keep_warm passed), capped (the oldest past lsp.max_parked or lsp.max_parked_per_enclosure), memory (the oldest past lsp.max_parked_rss_bytes), exited (its process ended while parked), shutdown (Berth stopped).",
		}, []string{"reason"}),
		LSPReopened: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_lsp_reopened_documents_total", Help: "Documents a run reopened at run/start in a language server it adopted (count), by server: those the run that parked the server had open, the most recently used first, up to lsp.reopen_max; moves when a run's reopen has ended.",
		}, []string{"server"}),
		LSPWarmUps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_lsp_warm_ups_total", Help: "Warm-up queries answered by language servers a run's prewarm started cold or adopted (count), by server: references about the first file under the root, or about each document an adopted server reopened, asked once the server loaded, so that the run's first call finds the server's analysis done (lsp.warm_up).",
		}, []string{"server"}),
		DebugPrebuilds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_debug_prebuilds_total", Help: "Prebuilds ended (count): a debug adapter's build started at run/start so that the run's first launch finds its packages compiled (delve's), by adapter and result: done, failed (the build failed; a launch says why), timeout (debug.prebuild_timeout), cancelled (the runs that shared it ended, or a launch in its root came first).",
		}, []string{"adapter", "result"}),
		DebugPrebuildsRunning: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_debug_prebuilds_running", Help: "Prebuilds running now (count), at most 2 at once across every run; each ends with its run.",
		}),
		DebugPrebuildDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "berth_debug_prebuild_duration_seconds", Help: "How long the prebuilds that finished (result done) ran, in seconds, by adapter: the compile time a first launch was spared.",
			Buckets: durationBuckets,
		}, []string{"adapter"}),
	}
	m.BuildInfo.WithLabelValues(version, runtime.Version()).Set(1)
	m.zero()
	reg.MustRegister(m.RunsActive, m.SessionsActive, m.SessionStarts, m.SessionEnds, m.IdleTimeouts,
		m.TTLExpiries, m.CellInterrupts, m.ToolCalls, m.ToolCallDuration, m.StuckCalls,
		m.BridgeCallsInFlight, m.BridgeCallDuration, m.EnclosureExec, m.EnclosureErrors,
		m.Diagnostics, m.QuestionsPending, m.ReaperLastRun, m.BuildInfo, m.RPCMessagesRejected,
		m.RPCConnectionsActive, m.LSPRequestDuration, m.LSPServerRestarts, m.Reattaches, m.Restarts,
		m.LSPServerStarts, m.LSPParked, m.LSPParkedRSS, m.LSPParkedEnds, m.LSPReopened, m.LSPWarmUps,
		m.DebugPrebuilds, m.DebugPrebuildsRunning, m.DebugPrebuildDuration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// zero creates every label value known at start. Tools and language
// servers are named by configuration: KnowTool and KnowLSPServer create
// theirs.
func (m *Metrics) zero() {
	for _, k := range Kinds {
		for _, d := range Drivers {
			m.SessionsActive.WithLabelValues(k, d)
		}
		for _, o := range StartOutcomes {
			m.SessionStarts.WithLabelValues(k, o)
		}
		for _, r := range Reasons {
			m.SessionEnds.WithLabelValues(k, r)
		}
		m.IdleTimeouts.WithLabelValues(k)
		m.TTLExpiries.WithLabelValues(k)
		for _, o := range ReattachOutcomes {
			m.Reattaches.WithLabelValues(k, o)
		}
	}
	for _, o := range InterruptOutcomes {
		m.CellInterrupts.WithLabelValues(o)
	}
	for _, h := range RestartHows {
		m.Restarts.WithLabelValues(h)
	}
	for _, d := range Drivers {
		m.EnclosureExec.WithLabelValues(d)
		for _, op := range EnclosureOps {
			m.EnclosureErrors.WithLabelValues(d, op)
		}
	}
	for _, d := range Dispositions {
		m.Diagnostics.WithLabelValues(d)
	}
	for _, r := range RejectReasons {
		m.RPCMessagesRejected.WithLabelValues(r)
	}
	for _, t := range Transports {
		m.RPCConnectionsActive.WithLabelValues(t)
	}
	for _, d := range Drivers {
		m.LSPParked.WithLabelValues(d)
	}
	for _, r := range ParkedEndReasons {
		m.LSPParkedEnds.WithLabelValues(r)
	}
}

// NewForTest builds collectors on a fresh registry, for tests and tools
// that need a *Metrics but serve none.
func NewForTest() *Metrics { return New(prometheus.NewRegistry(), "test") }

// KnowTool creates a tool's series at zero (every outcome, and its
// duration histogram), so its first call is seen by rate().
func (m *Metrics) KnowTool(tool, tier string) {
	for _, o := range ToolOutcomes {
		m.ToolCalls.WithLabelValues(tool, tier, o)
	}
	m.ToolCallDuration.WithLabelValues(tool, tier)
}

// KnowLSPServer creates a language server's restart and start counters
// at zero.
func (m *Metrics) KnowLSPServer(server string) {
	m.LSPServerRestarts.WithLabelValues(server)
	m.LSPReopened.WithLabelValues(server)
	m.LSPWarmUps.WithLabelValues(server)
	for _, how := range LSPStartKinds {
		m.LSPServerStarts.WithLabelValues(server, how)
	}
}

// PrebuildResults are berth_debug_prebuilds_total's result values.
var PrebuildResults = []string{"done", "failed", "timeout", "cancelled"}

// KnowPrebuild creates a debug adapter's prebuild series at zero.
func (m *Metrics) KnowPrebuild(adapter string) {
	for _, r := range PrebuildResults {
		m.DebugPrebuilds.WithLabelValues(adapter, r)
	}
	m.DebugPrebuildDuration.WithLabelValues(adapter)
}

// LSPServerRestarted counts a restart of a crashed or failed server.
func (m *Metrics) LSPServerRestarted(server string) {
	m.LSPServerRestarts.WithLabelValues(server).Inc()
}

// SessionStarted records a session start in an enclosure of driver and
// counts it active.
func (m *Metrics) SessionStarted(kind, driver string) {
	m.SessionStarts.WithLabelValues(kind, "ok").Inc()
	m.SessionsActive.WithLabelValues(kind, driver).Inc()
}

// SessionResumed counts a session a Berth took back after a restart
// active again (its start was counted by the Berth that started it).
func (m *Metrics) SessionResumed(kind, driver string) {
	m.SessionsActive.WithLabelValues(kind, driver).Inc()
}

// RestartHows are berth_restarts_total's how: how the Berth before
// ended.
var RestartHows = []string{"handoff", "crash"}

// Restarted counts this Berth's start on a state directory whose Berth
// before ended how (state.Store.Previous; "" counts nothing).
func (m *Metrics) Restarted(how string) {
	if slices.Contains(RestartHows, how) {
		m.Restarts.WithLabelValues(how).Inc()
	}
}

// Reattached counts what became of a kept process found at start.
func (m *Metrics) Reattached(kind, outcome string) {
	if !slices.Contains(Kinds, kind) {
		return // a record's kind is data: never an unbounded label
	}
	m.Reattaches.WithLabelValues(kind, outcome).Inc()
}

// SessionFailed records a session that failed to start.
func (m *Metrics) SessionFailed(kind string) { m.SessionStarts.WithLabelValues(kind, "error").Inc() }

// SessionEnded records a session end with its reason and counts it
// inactive; an idle timeout or a TTL expiry is also counted on its own.
func (m *Metrics) SessionEnded(kind, driver, reason string) {
	m.SessionEnds.WithLabelValues(kind, reason).Inc()
	m.SessionsActive.WithLabelValues(kind, driver).Dec()
	switch reason {
	case ReasonIdle:
		m.IdleTimeouts.WithLabelValues(kind).Inc()
	case ReasonTTL:
		m.TTLExpiries.WithLabelValues(kind).Inc()
	}
}

// CellInterrupted counts an interrupted cell by outcome (InterruptInterrupted
// or InterruptKilled).
func (m *Metrics) CellInterrupted(outcome string) { m.CellInterrupts.WithLabelValues(outcome).Inc() }

// BridgeCall counts a tool() re-entry call in flight; the returned
// function, called when the harness answers, counts it out and observes
// its duration.
func (m *Metrics) BridgeCall() (done func()) {
	start := time.Now()
	m.BridgeCallsInFlight.Inc()
	return func() {
		m.BridgeCallsInFlight.Dec()
		m.BridgeCallDuration.Observe(time.Since(start).Seconds())
	}
}
