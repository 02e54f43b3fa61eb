package vibe

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

// outputGrace is how long output is still read after a worker's process
// group has died, from processes that escaped it.
const outputGrace = 2 * time.Second

// stopGrace is how long a worker has after SIGTERM (vibe_send's restart,
// vibe_kill, the run's end) before its group is killed: time for an agent
// to stop cleanly, as its runner would give it.
const stopGrace = 2 * time.Second

// errRunEnded refuses work on a pool whose run has ended.
var errRunEnded = fmt.Errorf("the run has ended, and its workers with it: start a new run: %w", orchestrator.ErrRunEnded)

// pool is one run's workers. Its mutex guards the worker table and every
// worker's and attempt's mutable fields; no process is started or waited
// for while it is held, except Start itself, so that Close either sees a
// new attempt or stops it from starting.
type pool struct {
	cfg     Config
	metrics *metrics.Metrics
	enc     enclosure.Enclosure
	run     *orchestrator.Run // for why its end ended the workers
	runCtx  context.Context
	workdir string

	mu      sync.Mutex
	closed  bool
	next    int
	workers []*worker // in spawn order
	// prefix starts the run's worker ids: "w" in a new run; in a run
	// resumed after Berth restarted, one with a random tag too, so that
	// no id of a worker from before the restart (lost with that Berth)
	// names one spawned after it.
	prefix  string
	resumed bool

	closeOnce sync.Once
}

type poolKey struct{}

// poolOf returns the run's pool, creating it on first use. The pool closes
// with the run: through Run.Value's Close, and through the run's context in
// case the pool was made while the run was ending (too late for Value to
// register its Close).
func poolOf(run *orchestrator.Run, cfg Config, m *metrics.Metrics) *pool {
	return run.Value(poolKey{}, func() any {
		p := &pool{cfg: cfg, metrics: m, enc: run.Enclosure, run: run, runCtx: run.Context(), workdir: run.Workdir, prefix: "w"}
		if run.Resumed {
			var b [2]byte
			_, _ = rand.Read(b[:])
			p.prefix, p.resumed = "w"+hex.EncodeToString(b[:])+"_", true
		}
		context.AfterFunc(run.Context(), p.Close)
		return p
	}).(*pool)
}

// spawn starts a new worker and returns it once its process has started.
// surface is that of the call that spawns it.
func (p *pool) spawn(tier, label, brief string, surface orchestrator.Surface) (*worker, error) {
	argv, err := p.cfg.runner(tier)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errRunEnded
	}
	if live := p.live(); live >= p.cfg.MaxWorkers {
		return nil, fmt.Errorf("this run already has %d workers (vibe.max_workers is %d): vibe_kill one you no longer need (a finished worker still holds a slot) and spawn again", live, p.cfg.MaxWorkers)
	}
	w := &worker{id: fmt.Sprintf("%s%d", p.prefix, p.next+1), label: label, tier: tier, argv: argv, brief: brief, surface: surface}
	if err := p.begin(w); err != nil {
		p.metrics.SessionFailed(metrics.KindWorker)
		if enclosure.Down(err) {
			// The container, not the runner's configuration (issue 24
			// item 11): its error says what to do.
			return nil, fmt.Errorf("could not start the %s runner: %s", tier, enclosure.Say(err))
		}
		return nil, fmt.Errorf("could not start the %s runner %q: %w; fix vibe.runners.%s in Berth's configuration", tier, argv, err, tier)
	}
	p.next++
	p.workers = append(p.workers, w)
	p.metrics.SessionStarted(metrics.KindWorker, p.enc.Driver())
	return w, nil
}

// live counts workers whose session has not ended. p.mu must be held.
func (p *pool) live() int {
	n := 0
	for _, w := range p.workers {
		if !w.gone {
			n++
		}
	}
	return n
}

// begin starts an attempt over the worker's assignment so far. p.mu must
// be held.
func (p *pool) begin(w *worker) error {
	argv, env := w.command()
	dir, err := p.enc.MapPath(p.workdir)
	if err != nil {
		return err
	}
	proc, err := p.enc.Start(p.runCtx, enclosure.Cmd{Path: argv[0], Args: argv[1:], Env: env, Dir: dir})
	if err != nil {
		return err
	}
	a := &attempt{proc: proc, started: time.Now(), done: make(chan struct{})}
	w.cur = a
	if w.status != statusRunning {
		w.status = statusRunning
		w.settled = make(chan struct{})
	}
	go p.watch(w, a, assignment(w.brief, w.messages))
	return nil
}

// watch is the attempt's owner goroutine: it feeds the assignment, keeps
// the capped output, waits for the exit and records the outcome.
func (p *pool) watch(w *worker, a *attempt, input string) {
	stdout := &capture{limit: p.cfg.OutputLimit}
	stderr := &capture{limit: p.cfg.StderrLimit, tail: true}
	var wg sync.WaitGroup
	wg.Go(func() {
		// A worker that exits without reading makes this fail; its exit
		// status says what happened.
		_, _ = io.WriteString(a.proc.Stdin(), input)
		_ = a.proc.Stdin().Close()
	})
	wg.Go(func() { _, _ = io.Copy(stderr, a.proc.Stderr()) })
	wg.Go(func() { _, _ = io.Copy(stdout, a.proc.Stdout()) })
	copied := make(chan struct{})
	go func() { wg.Wait(); close(copied) }()
	select {
	case <-copied:
	case <-a.proc.Done():
		// The worker and its process group are gone. A process that left
		// the group (setsid) may still hold the pipes open: take what it
		// writes for a moment, then stop reading, so the worker settles
		// and the run can end.
		select {
		case <-copied:
		case <-time.After(outputGrace):
			closeReaders(a.proc)
			<-copied
		}
	}
	closeReaders(a.proc)
	code, err := a.proc.Wait()

	p.mu.Lock()
	a.ended = time.Now()
	a.out.stdout, a.out.stdoutCut = stdout.text()
	a.out.stderr, a.out.stderrCut = stderr.text()
	a.out.code, a.out.err = code, err
	switch a.stop {
	case stopSuperseded:
		// vibe_send starts the next attempt; the worker is still running.
	case stopKilled:
		a.out = outcome{} // a killed worker's output is not kept
		p.settle(w, statusKilled)
	default:
		if err == nil && code == 0 {
			p.settle(w, statusSucceeded)
		} else {
			p.settle(w, statusFailed)
		}
	}
	p.mu.Unlock()
	close(a.done)
}

// settle moves a running worker to a final status. p.mu must be held.
func (p *pool) settle(w *worker, status string) {
	if w.status == statusRunning {
		close(w.settled)
	}
	w.status = status
}

// find returns the worker with id, or an error listing the ids there are.
func (p *pool) find(id string) (*worker, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for _, w := range p.workers {
		if w.id == id {
			return w, nil
		}
		ids = append(ids, w.id)
	}
	if p.resumed && !strings.HasPrefix(id, p.prefix) {
		// Issue 29 item 3: workers end with the Berth that ran them.
		msg := fmt.Sprintf("worker %q is gone: Berth restarted since it was spawned, and workers end with the Berth that runs them (its process, its output and its slot are lost); spawn a new worker with vibe_spawn to do its work", id)
		if len(ids) > 0 {
			msg += "; the workers spawned since the restart are " + strings.Join(ids, ", ")
		}
		return nil, errors.New(msg)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("unknown worker %q: this run has no workers; start one with vibe_spawn", id)
	}
	return nil, fmt.Errorf("unknown worker %q: this run has %s (see vibe_list)", id, strings.Join(ids, ", "))
}

// send appends a message to the worker's assignment and reruns it,
// stopping the running attempt first. The rerun is told surface, that of
// the call that sends: a plan agent's message never reruns a worker with
// more than plan's rights.
func (p *pool) send(w *worker, message string, surface orchestrator.Surface) (stopped bool, err error) {
	w.op.Lock()
	defer w.op.Unlock()
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		return false, errRunEnded
	case w.gone:
		p.mu.Unlock()
		return false, fmt.Errorf("worker %s was killed and cannot be resumed: spawn a new worker with vibe_spawn", w.id)
	}
	w.messages = append(w.messages, message)
	old := w.cur
	running := old.ended.IsZero()
	if running {
		old.stop = stopSuperseded
	}
	p.mu.Unlock()
	if running {
		enclosure.Stop(old.proc, nil, stopGrace)
		<-old.done
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return running, errRunEnded
	}
	w.surface = surface
	if err := p.begin(w); err != nil {
		w.cur = startFailure(fmt.Errorf("could not start the %s runner %q: %w", w.tier, w.argv, err))
		p.settle(w, statusFailed)
		if enclosure.Down(err) {
			return running, fmt.Errorf("worker %s could not be restarted: %s", w.id, enclosure.Say(err))
		}
		return running, fmt.Errorf("worker %s could not be restarted: %v; fix vibe.runners.%s in Berth's configuration", w.id, err, w.tier)
	}
	return running, nil
}

// kill stops the worker for good. It reports false when the worker was
// already killed.
func (p *pool) kill(w *worker) bool {
	w.op.Lock()
	defer w.op.Unlock()
	p.mu.Lock()
	if w.gone {
		p.mu.Unlock()
		return false
	}
	w.gone = true
	a := p.stopLocked(w)
	p.mu.Unlock()
	if a != nil {
		enclosure.Stop(a.proc, nil, stopGrace)
		<-a.done
	}
	p.metrics.SessionEnded(metrics.KindWorker, p.enc.Driver(), metrics.ReasonStopped)
	return true
}

// stopLocked marks the worker killed: a running attempt is returned for
// the caller to kill and wait for (its watcher records the status); a
// settled worker is killed at once. p.mu must be held.
func (p *pool) stopLocked(w *worker) *attempt {
	a := w.cur
	if a.ended.IsZero() {
		a.stop = stopKilled
		return a
	}
	if w.status != statusKilled {
		p.settle(w, statusKilled)
	}
	w.cur.out = outcome{}
	return nil
}

// wait blocks until the worker settles, timeout passes or ctx ends; it
// reports whether the worker settled.
func (p *pool) wait(ctx context.Context, w *worker, timeout time.Duration) (bool, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		p.mu.Lock()
		status, settled := w.status, w.settled
		p.mu.Unlock()
		if status != statusRunning {
			return true, nil
		}
		select {
		case <-settled:
			// A vibe_send may have started it again: look once more.
		case <-timer.C:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// Close kills every worker and waits for their processes to be gone. It
// runs when the run ends.
func (p *pool) Close() {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		var running []*attempt
		for _, w := range p.workers {
			if w.gone {
				continue
			}
			w.gone = true
			p.metrics.SessionEnded(metrics.KindWorker, p.enc.Driver(), p.run.SessionEndReason())
			if a := p.stopLocked(w); a != nil {
				running = append(running, a)
			}
		}
		p.mu.Unlock()
		var wg sync.WaitGroup
		for _, a := range running {
			wg.Go(func() { enclosure.Stop(a.proc, nil, stopGrace) })
		}
		wg.Wait()
		for _, a := range running {
			<-a.done
		}
	})
}

// closeReaders closes the process's output pipes: once read to the end,
// or to end the reads of a worker whose pipes outlive it.
func closeReaders(proc enclosure.Process) {
	for _, r := range []io.Reader{proc.Stdout(), proc.Stderr()} {
		if c, ok := r.(io.Closer); ok {
			_ = c.Close()
		}
	}
}
