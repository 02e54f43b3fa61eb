package orchestrator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/internal/errclass"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

// End reasons for runs.
const (
	EndStopped    = "stopped"      // run/stop
	EndDisconnect = "disconnected" // its connection closed and the grace passed
	EndIdle       = "idle"         // no call for runs.idle_timeout
	EndShutdown   = "shutdown"     // Berth is stopping
)

// StartParams are run/start's parameters.
type StartParams struct {
	RunID          string
	ConversationID string
	Workdir        string
	Enclosure      enclosure.Spec
	Features       map[string]bool
	Harness        Harness
	// NewHarness, when set, builds the harness for the run's id (RunID, or
	// the fresh one Start picks), for a harness that names its run.
	NewHarness func(runID string) Harness
	Owner      any
}

// Runs keeps the live runs, ends idle ones, and ends a connection's runs
// when it goes away.
type Runs struct {
	// WriteReadOnlyMounts lets runs write files their container has on
	// a read-only mount (enclosure.write_read_only_mounts); set it before
	// serving.
	WriteReadOnlyMounts bool
	// Keeping keeps the processes that ask for it across a restart of
	// Berth (a state directory); nil: none is kept. Set it before
	// serving.
	Keeping *Keeping
	// Resumers give the processes taken back after a restart (Reattach)
	// to their runs, by kind; set them before serving.
	Resumers map[string]Resumer
	// Takers take the processes of their kind at once when they are
	// taken back, for no run (language servers, parked); set them before
	// serving.
	Takers map[string]Taker
	// OnStart, when set, is called with each run Start made, once it is
	// in the table and before Start returns (Registry.RunStarted: the
	// providers' background work). It must return at once.
	OnStart func(run *Run)

	metrics     *metrics.Metrics
	idleTimeout time.Duration
	lookup      *enclosure.Lookup

	mu      sync.Mutex
	runs    map[string]*Run
	pending map[string]*pending // taken back after a restart, by run id
}

// NewRuns builds the run table, which looks enclosures up in lookup (the
// command wires its drivers: the core imports none). idleTimeout <= 0
// disables idle reaping.
func NewRuns(m *metrics.Metrics, idleTimeout time.Duration, lookup *enclosure.Lookup) *Runs {
	return &Runs{metrics: m, idleTimeout: idleTimeout, lookup: lookup, runs: map[string]*Run{}, pending: map[string]*pending{}}
}

// Start creates a run. The working directory must exist; the enclosure is
// looked up, never created.
func (rs *Runs) Start(ctx context.Context, p StartParams) (*Run, error) {
	if p.Workdir == "" {
		return nil, fmt.Errorf("workdir is required: pass the absolute path of the checkout: %w", ErrInvalid)
	}
	if !filepath.IsAbs(p.Workdir) {
		return nil, fmt.Errorf("workdir %q is not absolute: pass an absolute path: %w", p.Workdir, ErrInvalid)
	}
	wd, err := filepath.EvalSymlinks(p.Workdir)
	if err != nil {
		return nil, fmt.Errorf("workdir %q: %v: pass an existing directory: %w", p.Workdir, err, ErrInvalid)
	}
	if st, err := os.Stat(wd); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("workdir %q is not a directory: %w", p.Workdir, ErrInvalid)
	}
	if err := CheckFeatures(p.Features); err != nil {
		return nil, err
	}
	enc, err := rs.lookup.Find(ctx, p.Enclosure, p.ConversationID)
	if err != nil {
		rs.metrics.AttachFailed(p.Enclosure.Driver, err)
		if errclass.Of(err) == "" {
			// A driver's error that lost its class: the parameters
			// named an enclosure that cannot be used.
			return nil, fmt.Errorf("enclosure: %v: %w", err, ErrInvalid)
		}
		// The driver's class travels: a stopped or removed container is
		// gone, an engine that did not answer or a paused container is
		// unavailable, an unknown driver or a missing id is invalid.
		return nil, fmt.Errorf("enclosure: %w", err)
	}
	// Every tool works on the workdir through the enclosure's view of it:
	// a container that does not mount it is refused now, with the mounts
	// it has, not at the first tool call.
	if _, err := enc.MapPath(wd); err != nil {
		// The path lookup's not found is a bad run/start here: the
		// workdir names what the container does not mount.
		return nil, fmt.Errorf("enclosure %s %s cannot see the workdir: %w", enc.Driver(), enc.ID(), errclass.Reclass(err, ErrInvalid))
	}
	enc = rs.metrics.Enclosure(enc) // timed and counted for every driver
	id := p.RunID
	if id == "" {
		id = newRunID()
	}
	// A run id whose processes were taken back after a restart gets
	// them, if the rest matches; a mismatch is refused.
	back, err := rs.claim(id, p.ConversationID, wd, enc)
	if err != nil {
		return nil, err
	}
	if rs.Keeping != nil {
		enc = rs.Keeping.enclosure(enc, id, p.ConversationID, wd)
	}
	if p.NewHarness != nil {
		p.Harness = p.NewHarness(id)
	}
	run := NewRun(id, p.ConversationID, wd, enc, p.Harness, p.Features)
	run.Owner = p.Owner
	run.WriteReadOnly = rs.WriteReadOnlyMounts
	// Set before the run is published: its tools' state, made on first
	// use, says what a restart lost when it was resumed.
	run.Resumed = back != nil
	rs.mu.Lock()
	if _, dup := rs.runs[id]; dup {
		rs.mu.Unlock()
		run.End(EndStopped)
		if back != nil {
			rs.endPendingOf(back)
		}
		return nil, fmt.Errorf("run %q already exists: stop it first or omit runId to get a fresh one: %w", id, errclass.ErrConflict)
	}
	rs.runs[id] = run
	rs.mu.Unlock()
	if rs.Keeping != nil {
		rs.Keeping.putRun(run)
		// A run ended between its publication and its record leaves
		// none behind.
		rs.mu.Lock()
		gone := rs.runs[id] != run
		rs.mu.Unlock()
		if gone {
			rs.Keeping.removeRun(id)
		}
	}
	rs.metrics.RunsActive.Inc()
	if back != nil {
		rs.resume(run, back)
	}
	if rs.OnStart != nil {
		rs.OnStart(run)
	}
	return run, nil
}

// Get returns the run with id if owner started it.
func (rs *Runs) Get(id string, owner any) (*Run, error) {
	rs.mu.Lock()
	run, ok := rs.runs[id]
	rs.mu.Unlock()
	if !ok || run.Owner != owner {
		return nil, fmt.Errorf("unknown run %q: start one with run/start on this connection: %w", id, ErrUnknownRun)
	}
	run.Touch()
	return run, nil
}

// Stop ends the run with id if owner started it.
func (rs *Runs) Stop(id string, owner any) error {
	run, err := rs.Get(id, owner)
	if err != nil {
		return err
	}
	rs.end(run, EndStopped)
	return nil
}

// EndOwnedBy ends every run the owner started (its connection closed).
func (rs *Runs) EndOwnedBy(owner any, reason string) {
	for _, r := range rs.snapshot() {
		if r.Owner == owner {
			rs.end(r, reason)
		}
	}
}

// StopAll ends every run (shutdown), and what was taken back after a
// restart and not claimed yet.
func (rs *Runs) StopAll() {
	rs.endPending()
	var wg sync.WaitGroup
	for _, r := range rs.snapshot() {
		wg.Add(1)
		go func() { defer wg.Done(); rs.end(r, EndShutdown) }()
	}
	wg.Wait()
}

// Len is the number of live runs.
func (rs *Runs) Len() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return len(rs.runs)
}

func (rs *Runs) snapshot() []*Run {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	out := make([]*Run, 0, len(rs.runs))
	for _, r := range rs.runs {
		out = append(out, r)
	}
	return out
}

func (rs *Runs) end(run *Run, reason string) {
	rs.mu.Lock()
	_, live := rs.runs[run.ID]
	if live && rs.runs[run.ID] == run {
		delete(rs.runs, run.ID)
	} else {
		live = false
	}
	rs.mu.Unlock()
	if live {
		rs.metrics.RunsActive.Dec()
		rs.Keeping.removeRun(run.ID)
	}
	run.End(reason)
}

// Reap ends runs idle longer than the idle timeout; a run with a call in
// flight is never idle.
func (rs *Runs) Reap(now time.Time) {
	rs.metrics.ReaperLastRun.Set(float64(now.Unix()))
	if rs.idleTimeout <= 0 {
		return
	}
	for _, r := range rs.snapshot() {
		if since, idle := r.idleSince(); idle && now.Sub(since) > rs.idleTimeout {
			rs.end(r, EndIdle)
		}
	}
}

// Reaper calls Reap every interval until ctx ends.
func (rs *Runs) Reaper(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	rs.Reap(time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			rs.Reap(now)
		}
	}
}

// newRunID returns a fresh random run id ("run_" and 16 hex digits), for
// a run/start that names none. Runs.Start is the one place that defaults
// an id.
func newRunID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "run_" + hex.EncodeToString(b[:])
}
