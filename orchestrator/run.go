package orchestrator

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/orchestrator/metrics"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// Run is one live agent execution. Every resource a tool starts for a run
// (a language server, a kernel, a worker, a staged edit) is tied to it with
// OnEnd or Value, and ending the run ends them all.
type Run struct {
	ID             string
	ConversationID string
	Workdir        string // absolute, cleaned, symlinks resolved
	Enclosure      enclosure.Enclosure
	Harness        Harness
	// Owner identifies the connection that started the run; other
	// connections cannot see it.
	Owner any
	// WriteReadOnly lets the run's tools write files its enclosure has on
	// a read-only mount (enclosure.write_read_only_mounts).
	WriteReadOnly bool
	// Resumed: the run got back processes a Berth before this one left
	// to their relays (run/start's result says so).
	Resumed bool

	ctx    context.Context
	cancel context.CancelFunc

	mu         sync.Mutex
	features   map[string]bool
	values     map[any]any
	closers    []*closer
	ended      bool
	endReason  string
	lastActive time.Time
	inFlight   int
	locks      map[string]chan struct{}
	root       *workspace.Root
}

// Root is the workdir as a workspace root, for resolving the paths tools
// are given and reading and writing files through its handle. It is made
// once (resolving the workdir again on every call costs a lookup per
// component of its path) and closed when the run ends.
func (r *Run) Root() (*workspace.Root, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.root != nil {
		return r.root, nil
	}
	if r.ended {
		return nil, fmt.Errorf("run %s has ended (%s): start a new run", r.ID, r.endReason)
	}
	// The enclosure's view: the paths an agent in the container passes
	// (/workspace/x.go) are accepted, errors name the workdir as it sees
	// it, and a read-only mount is not written.
	opts := workspace.Options{WriteReadOnly: r.WriteReadOnly}
	if r.Enclosure != nil {
		opts.View = r.Enclosure
	}
	root, err := workspace.NewWith(r.Workdir, opts)
	if err != nil {
		return nil, err
	}
	r.root = root
	r.closers = append(r.closers, &closer{f: func() { root.Close() }})
	return root, nil
}

// NewRun builds a run. Runs made outside Runs.Start (tests, the one-shot
// "call" command) must be ended with End.
func NewRun(id, conversationID, workdir string, enc enclosure.Enclosure, h Harness, features map[string]bool) *Run {
	ctx, cancel := context.WithCancel(context.Background())
	f := DefaultFeatures()
	for k, v := range features {
		f[k] = v
	}
	return &Run{
		ID: id, ConversationID: conversationID, Workdir: workdir, Enclosure: enc, Harness: h,
		ctx: ctx, cancel: cancel, features: f, values: map[any]any{},
		lastActive: time.Now(), locks: map[string]chan struct{}{},
	}
}

// Context is cancelled when the run ends. Background work of the run
// (a worker, a reader goroutine) should stop on it.
func (r *Run) Context() context.Context { return r.ctx }

// Feature says whether a feature is connected for the run.
func (r *Run) Feature(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.features[name]
}

// Features returns the names of the features that are on, sorted.
func (r *Run) Features() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var on []string
	for k, v := range r.features {
		if v {
			on = append(on, k)
		}
	}
	sort.Strings(on)
	return on
}

// SetFeatures switches features on or off (run/update).
func (r *Run) SetFeatures(f map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, v := range f {
		r.features[k] = v
	}
}

// Value returns the run's value for key, creating it with init on first
// use. Tool packages keep their per-run state here (use an unexported key
// type). If the value has a Close() method, it is closed when the run ends.
// init runs under the run's lock, so it must not call the run's methods
// (OnEnd, Feature, ...): close through Close, or watch Context.
func (r *Run) Value(key any, init func() any) any {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.values[key]; ok {
		return v
	}
	v := init()
	r.values[key] = v
	if c, ok := v.(interface{ Close() }); ok {
		if r.ended {
			// Made while the run was ending: close it now, not never.
			defer c.Close()
		} else {
			r.closers = append(r.closers, &closer{f: c.Close})
		}
	}
	return v
}

// closer is one OnEnd registration; f is nil once cancelled.
type closer struct{ f func() }

// OnEnd registers f to run when the run ends, after those registered
// later (last in, first out). On an ended run f runs at once. The returned
// function unregisters f, for a resource that ended before its run (a
// finished debug session); it is safe to call at any time.
func (r *Run) OnEnd(f func()) (unregister func()) {
	r.mu.Lock()
	if !r.ended {
		c := &closer{f: f}
		r.closers = append(r.closers, c)
		r.mu.Unlock()
		return func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			for i, x := range r.closers {
				if x == c {
					r.closers = append(r.closers[:i], r.closers[i+1:]...)
					return
				}
			}
		}
	}
	r.mu.Unlock()
	f()
	return func() {}
}

// Ended says whether the run has ended, and why.
func (r *Run) Ended() (bool, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ended, r.endReason
}

// SessionEndReason is the berth_session_ends_total reason of a session
// that ends because its run did: disconnected or shutdown when that is why
// the run ended, run_ended otherwise (stopped, idle).
func (r *Run) SessionEndReason() string {
	switch _, why := r.Ended(); why {
	case EndDisconnect:
		return metrics.ReasonDisconnected
	case EndShutdown:
		return metrics.ReasonShutdown
	}
	return metrics.ReasonRunEnded
}

// End ends the run: cancels its context and runs every closer, newest
// first. Safe to call more than once; only the first call does anything.
func (r *Run) End(reason string) {
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		return
	}
	r.ended, r.endReason = true, reason
	closers := r.closers
	r.closers = nil
	r.mu.Unlock()
	r.cancel()
	for i := len(closers) - 1; i >= 0; i-- {
		closers[i].f()
	}
}

// touch marks activity; begin and done bracket a call so a long call keeps
// the run from looking idle.
func (r *Run) begin() {
	r.mu.Lock()
	r.inFlight++
	r.lastActive = time.Now()
	r.mu.Unlock()
}

func (r *Run) done() {
	r.mu.Lock()
	r.inFlight--
	r.lastActive = time.Now()
	r.mu.Unlock()
}

// Touch marks the run as active now (any protocol message about it).
func (r *Run) Touch() {
	r.mu.Lock()
	r.lastActive = time.Now()
	r.mu.Unlock()
}

// idleSince returns when the run was last active, and false while a call
// is in flight.
func (r *Run) idleSince() (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastActive, r.inFlight == 0
}

// toolLock returns the one-slot semaphore that serialises a
// non-parallel-safe tool on this run; a channel, so waiting can be
// cancelled.
func (r *Run) toolLock(name string) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.locks[name]
	if !ok {
		m = make(chan struct{}, 1)
		r.locks[name] = m
	}
	return m
}
