package kernel

import (
	"context"
	"sync"
	"time"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

// kernelsKey keys a run's kernels in run.Value.
type kernelsKey struct{}

// kernels is one run's kernels, at most one per language. Calls on a run
// are serialised by dispatch (eval is not parallel-safe); the lock guards
// against the idle timer and the run's end.
type kernels struct {
	cfg Config
	m   *metrics.Metrics
	run *orchestrator.Run // for why its end ended the kernels

	mu     sync.Mutex
	live   map[string]*slot
	closed bool
	ending sync.WaitGroup // discarded kernels still stopping
}

// slot is a live kernel with its idle timer; busy while a cell runs.
type slot struct {
	k    *kernel
	idle *time.Timer
	busy bool
}

// kernelsOf returns the run's kernels, made on first use and closed when
// the run ends.
func kernelsOf(run *orchestrator.Run, cfg Config, m *metrics.Metrics) *kernels {
	return run.Value(kernelsKey{}, func() any {
		return &kernels{cfg: cfg, m: m, run: run, live: map[string]*slot{}}
	}).(*kernels)
}

// acquire returns the language's kernel, starting one if there is none,
// and marks it busy so the idle timer leaves it alone. A kernel that died
// since its last cell is replaced, and lost says how it ended.
func (ks *kernels) acquire(ctx context.Context, run *orchestrator.Run, lang string) (k *kernel, lost string, err error) {
	ks.mu.Lock()
	if ks.closed {
		ks.mu.Unlock()
		return nil, "", orchestrator.ErrRunEnded
	}
	if s, ok := ks.live[lang]; ok {
		select {
		case <-s.k.proc.Done():
			delete(ks.live, lang)
			s.idle.Stop()
			ks.mu.Unlock()
			lost = s.k.exitDescription()
			s.k.end(metrics.ReasonCrashed)
		default:
			s.busy = true
			s.idle.Stop()
			ks.mu.Unlock()
			return s.k, "", nil
		}
	} else {
		ks.mu.Unlock()
	}

	k, err = startKernel(ctx, ks.cfg, run, lang, ks.m)
	if err != nil {
		return nil, lost, err
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.closed {
		go k.end(run.SessionEndReason())
		return nil, "", orchestrator.ErrRunEnded
	}
	s := &slot{k: k, busy: true}
	// Made stopped: the kernel is busy with its first cell, and release
	// starts the timer.
	s.idle = time.AfterFunc(ks.cfg.IdleTimeout, func() { ks.expire(lang, s) })
	s.idle.Stop()
	ks.live[lang] = s
	return k, lost, nil
}

// release marks the kernel idle again and restarts its idle timer.
func (ks *kernels) release(lang string, k *kernel) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if s, ok := ks.live[lang]; ok && s.k == k {
		s.busy = false
		s.idle.Reset(ks.cfg.IdleTimeout)
	}
}

// discard ends the language's kernel, if k is still the live one (or k is
// nil: whatever is live). It stops in the background: a reset's fresh
// kernel starts while the old one gets its grace, instead of after it
// (in a container, the stop signal alone is an exec). Close waits for it.
func (ks *kernels) discard(lang string, k *kernel, reason string) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	s, ok := ks.live[lang]
	if !ok || (k != nil && s.k != k) {
		return
	}
	delete(ks.live, lang)
	s.idle.Stop()
	// Recorded now; stopped in the background, added under the lock, so
	// Close, which takes it first, never waits on a counter that can
	// still grow.
	if s.k.retire(reason) {
		ks.ending.Go(s.k.stop)
	}
}

// expire is the idle timer: a kernel unused for the idle timeout ends.
func (ks *kernels) expire(lang string, s *slot) {
	ks.mu.Lock()
	if cur, ok := ks.live[lang]; !ok || cur != s || s.busy {
		ks.mu.Unlock()
		return
	}
	delete(ks.live, lang)
	ks.mu.Unlock()
	s.k.end(metrics.ReasonIdle)
}

// Close ends every kernel: the run is over.
func (ks *kernels) Close() {
	ks.mu.Lock()
	ks.closed = true
	live := ks.live
	ks.live = map[string]*slot{}
	ks.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range live {
		s.idle.Stop()
		wg.Go(func() { s.k.end(ks.run.SessionEndReason()) })
	}
	wg.Wait()
	ks.ending.Wait()
}
