package lsp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// supervisor keeps a run's language servers: one per (root, server),
// started on first use or at run/start (prewarm), adopted from the pool
// when an earlier run parked one for the same enclosure and root, a start
// shared by racing callers, a crashed server restarted with backoff up to
// a cap, and every server parked or ended with the run.
type supervisor struct {
	run     *orchestrator.Run
	conf    Config
	metrics *metrics.Metrics
	pool    *pool

	mu       sync.Mutex
	slots    map[slotKey]*slot
	closed   bool
	released chan struct{}  // closed once Close has parked or ended every server
	wg       sync.WaitGroup // start, watch and prewarm goroutines
	reloadMu sync.Mutex     // one reload at a time
}

type slotKey struct{ root, name string }

// slot is the life of one (root, server): its current server, or the start
// in progress, and its crash count.
type slot struct {
	key     slotKey
	m       match
	ready   chan struct{} // closed when the current start has finished
	srv     *server       // set when ready and the start succeeded
	err     error         // set when ready and the start failed
	crashes int           // crashes and failed starts in a row
	lastErr string        // why it last went down, for status
	// tainted: it crashed, failed to start or was reloaded in this run,
	// so its server is never parked for another run.
	tainted bool
	// how its current server came: metrics.LSPCold or LSPAdopted, with
	// how long it had been parked; prewarm says run/start asked for it.
	how       string
	parkedFor time.Duration
	prewarm   bool
	released  bool // the run has ended: its server is parked or closed
	// reopen: the documents the run that parked its adopted server had
	// open, with the epoch of that server's documents they belong to
	// (server.reopenList), until prewarm reopens them; reopened counts
	// those it did.
	reopen   []string
	epoch    uint64
	reopened []string // what reopenAdopted opened, in its order
	// warmed says what the warm-up of a server prewarm started cold or adopted
	// asked, and how long it took, for status; "" when none ran.
	warmed string
}

func newSupervisor(run *orchestrator.Run, conf Config, m *metrics.Metrics, pl *pool) *supervisor {
	return &supervisor{run: run, conf: conf, metrics: m, pool: pl, slots: map[slotKey]*slot{}, released: make(chan struct{})}
}

// get returns the ready server for m, starting or restarting it when
// needed. Racing callers share one start. ctx bounds only the wait: a start
// goes on for later callers when the caller gives up.
func (sv *supervisor) get(ctx context.Context, m match) (*server, error) {
	key := slotKey{m.root, m.cfg.Name}
	sv.mu.Lock()
	if sv.closed {
		sv.mu.Unlock()
		return nil, fmt.Errorf("the run has ended: %w", orchestrator.ErrRunEnded)
	}
	sl, ok := sv.slots[key]
	if !ok {
		sl = &slot{key: key, m: m, prewarm: prewarming(ctx)}
		sv.slots[key] = sl
		sv.launch(sl, 0)
	} else if done(sl.ready) && (sl.srv == nil || !sl.srv.proc.alive()) {
		if sl.srv != nil && !sl.srv.proc.isClosing() {
			sv.noteCrash(sl, sl.srv) // found dead before its watcher saw it
		}
		if sl.crashes > sv.conf.MaxRestarts {
			err := fmt.Errorf("%s for %s failed %d times in a row (last: %s); it is not restarted again until you call lsp with action \"reload\"",
				m.cfg.Name, workspace.Rel(sv.run.Workdir, m.root), sl.crashes, sl.lastErr)
			sv.mu.Unlock()
			return nil, err
		}
		sv.metrics.LSPServerRestarted(m.cfg.Name)
		sv.launch(sl, sv.backoff(sl.crashes))
	}
	for {
		ready := sl.ready
		sv.mu.Unlock()
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, fmt.Errorf("%s for %s is still starting (a cold server can take a while): call again in a moment; lsp status shows its progress (%w)", m.cfg.Name, workspace.Rel(sv.run.Workdir, m.root), ctx.Err())
		}
		sv.mu.Lock()
		if sl.ready == ready {
			break
		}
		// A reload began a new start meanwhile: its server is the one to use.
	}
	defer sv.mu.Unlock()
	if sl.err != nil {
		return nil, sl.err
	}
	return sl.srv, nil
}

// running says a live server runs for (root, name) (detect's running).
func (sv *supervisor) running(root, name string) bool {
	var srv *server
	sv.mu.Lock()
	if sl := sv.slots[slotKey{root, name}]; sl != nil && !sv.closed && done(sl.ready) {
		srv = sl.srv
	}
	sv.mu.Unlock()
	return srv != nil && srv.proc.alive()
}

// backoff is the wait before restart n (1-based): RestartBackoff doubled
// for each crash in a row.
func (sv *supervisor) backoff(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	return sv.conf.RestartBackoff << (n - 1)
}

// launch starts sl's server after wait, in the background, adopting a
// parked one when there is one. Called with mu.
func (sv *supervisor) launch(sl *slot, wait time.Duration) {
	sl.ready = make(chan struct{})
	sl.srv, sl.err = nil, nil
	sv.start(sl, wait, true)
}

// start starts sl's server after wait, in the background, and closes
// sl.ready when it is up or has failed. With adopt, a server an earlier
// run parked for the same key is taken instead, when the pool has one.
// Called with mu.
func (sv *supervisor) start(sl *slot, wait time.Duration, adopt bool) {
	ready := sl.ready
	sv.wg.Add(1)
	go func() {
		defer sv.wg.Done()
		runCtx := sv.run.Context()
		if wait > 0 {
			select {
			case <-time.After(wait):
			case <-runCtx.Done():
			}
		}
		var srv *server
		var err error
		how, parkedFor := metrics.LSPCold, time.Duration(0)
		var reopen []string
		var epoch uint64
		if adopt && runCtx.Err() == nil {
			if ws, werr := sv.run.Root(); werr == nil {
				if srv, parkedFor = sv.pool.adopt(keyOf(sv.run, sl.m), ws); srv != nil {
					how = metrics.LSPAdopted
					reopen, epoch = srv.reopenList()
				}
			}
		}
		if srv == nil {
			ctx, cancel := context.WithTimeout(runCtx, sv.conf.StartTimeout)
			srv, err = startServer(ctx, sv.run, sv.conf, sl.m, sv.metrics)
			cancel()
		}
		sv.mu.Lock()
		if err == nil && sv.closed {
			// The run ended while it started: it is parked for the next
			// run, as the run's own servers were, or ended.
			tainted := sl.tainted
			sv.mu.Unlock()
			if tainted || !sv.park(sl.m, srv) {
				srv.proc.close()
			}
			sv.mu.Lock()
			err = fmt.Errorf("the run has ended: %w", orchestrator.ErrRunEnded)
			srv = nil
		}
		sl.srv, sl.err = srv, err
		if err != nil {
			sl.crashes++
			sl.tainted = true
			sl.lastErr = firstLine(err.Error())
			sv.metrics.SessionFailed(metrics.KindLSP)
		} else {
			sl.how, sl.parkedFor = how, parkedFor
			sl.reopen, sl.epoch, sl.reopened, sl.warmed = reopen, epoch, nil, ""
			sv.metrics.SessionStarted(metrics.KindLSP, sv.run.Enclosure.Driver())
			sv.metrics.LSPServerStarts.WithLabelValues(sl.m.cfg.Name, how).Inc()
			sv.wg.Add(1)
			go sv.watch(sl, srv)
		}
		close(ready)
		sv.mu.Unlock()
	}()
}

// reopenAdopted reopens, when srv was adopted for m, the documents the
// run that parked it had open (lsp.reopen_max of them, the most recently
// used first), so that the run's first call about one finds it open and
// analysed. Prewarm calls it, the run's thinking time ahead: an adoption
// at a call reopens nothing, the call waiting. ctx is the run's.
func (sv *supervisor) reopenAdopted(ctx context.Context, m match, srv *server) {
	sv.mu.Lock()
	sl := sv.slots[slotKey{m.root, m.cfg.Name}]
	if sl == nil || !sl.prewarm || sl.srv != srv || len(sl.reopen) == 0 {
		sv.mu.Unlock()
		return
	}
	paths, epoch := sl.reopen, sl.epoch
	sl.reopen = nil
	sv.mu.Unlock()
	opened := srv.reopen(ctx, paths, epoch)
	sv.metrics.LSPReopened.WithLabelValues(m.cfg.Name).Add(float64(len(opened)))
	sv.mu.Lock()
	if sl.srv == srv {
		sl.reopened = append(sl.reopened, opened...)
	}
	sv.mu.Unlock()
}

// warmUpPrewarmed asks srv, when prewarm started it cold or adopted it
// for m, the warm-up query (server.warmUp), unless lsp.warm_up is off.
// A server started cold is asked about the file it has synced (tsserver's
// load probe opens one), else the first under its root: the root is not
// walked a second time. An adopted one, after reopenAdopted, is asked
// about each document it reopened, the most recently used first, until
// the run's first call about any file of the server: a
// reopened document is parsed and analysed anew at its first query, and
// a warm-up about another file does not do it (pyright answered a run's
// first references about a reopened file in 11-16 ms either way, and in
// 7 ms after a warm-up about that file; 5 ms warm). ctx is the run's.
func (sv *supervisor) warmUpPrewarmed(ctx context.Context, m match, srv *server) {
	if !sv.conf.WarmUp || !m.cfg.warmsUp() {
		return
	}
	sv.mu.Lock()
	sl := sv.slots[slotKey{m.root, m.cfg.Name}]
	ok := sl != nil && sl.prewarm && sl.srv == srv && (sl.how == metrics.LSPCold || sl.how == metrics.LSPAdopted)
	adopted := ok && sl.how == metrics.LSPAdopted
	sv.mu.Unlock()
	if !ok {
		return
	}
	var files []string
	if adopted {
		sv.mu.Lock()
		files = slices.Clone(sl.reopened)
		sv.mu.Unlock()
	} else if file := srv.docs.lastSynced(); file != "" {
		files = []string{file}
	} else if file := firstFile(m.root, m.cfg); file != "" {
		files = []string{file}
	}
	var asked []string
	var took time.Duration
	for _, file := range files {
		if srv.docs.used() {
			break // the run's calls have begun: they go first
		}
		ok, d, err := srv.warmUp(ctx, file)
		if errors.Is(err, errGone) {
			continue // deleted since the reopen
		}
		if err != nil {
			if ctx.Err() == nil {
				slog.Debug("lsp: warm-up", "server", m.cfg.Name, "file", file, "err", err)
			}
			break
		}
		if ok {
			sv.metrics.LSPWarmUps.WithLabelValues(m.cfg.Name).Inc()
			asked, took = append(asked, srv.paths.rel(file)), took+d
		}
	}
	if len(asked) == 0 {
		return
	}
	about := asked[0]
	if len(asked) > 1 {
		about = fmt.Sprintf("%d reopened documents, %s first", len(asked), asked[0])
	}
	sv.mu.Lock()
	if sl.srv == srv {
		sl.warmed = fmt.Sprintf("warmed up (references in %s, %s, in the run's thinking time)", about, took.Round(time.Millisecond))
	}
	sv.mu.Unlock()
}

// park hands srv, for m, to the pool for the next run on the same
// enclosure and root, unless the run ended with Berth or the server is
// in no state to serve another run; it says whether it did.
func (sv *supervisor) park(m match, srv *server) bool {
	if sv.run.SessionEndReason() == metrics.ReasonShutdown || !srv.parkable() {
		return false
	}
	return sv.pool.park(keyOf(sv.run, m), srv)
}

// watch records the end of a server: a crash unless it was closed on
// purpose. It stops watching once the run has parked or ended its
// servers: a parked server is the pool's to watch.
func (sv *supervisor) watch(sl *slot, srv *server) {
	defer sv.wg.Done()
	select {
	case <-srv.proc.exited:
	case <-srv.proc.conn.Done():
	case <-sv.released:
		return
	}
	if srv.proc.isClosing() {
		return
	}
	sv.mu.Lock()
	if sl.released {
		sv.mu.Unlock()
		return
	}
	sv.noteCrash(sl, srv)
	sv.mu.Unlock()
	srv.proc.kill() // reap what is left of it
}

// noteCrash counts srv's unexpected end once, whoever sees it first: its
// watcher, or a call that finds it dead and must know the crash count to
// pick the backoff. Called with mu.
func (sv *supervisor) noteCrash(sl *slot, srv *server) {
	if srv.proc.crashNoted {
		return
	}
	srv.proc.crashNoted = true
	sl.tainted = true
	if time.Since(srv.proc.started) > time.Minute {
		sl.crashes = 0 // it had been healthy: this is a fresh run of crashes
	}
	sl.crashes++
	sl.lastErr = "the server exited unexpectedly"
	if refused := srv.proc.refusal(); refused != nil {
		sl.lastErr = firstLine(refused.Error())
	} else if tail := srv.proc.stderr.tail(1); tail != "" {
		sl.lastErr += ": " + tail
	}
	sv.metrics.SessionEnded(metrics.KindLSP, sv.run.Enclosure.Driver(), metrics.ReasonCrashed)
}

// reloadDrain bounds how long a reload lets the requests already sent to
// a server finish before it closes the server.
const reloadDrain = 5 * time.Second

// reload ends the servers whose root and name match (all of them when
// keep is nil) and starts them again at once, resetting their crash count.
func (sv *supervisor) reload(ctx context.Context, keep func(slotKey) bool) ([]*slot, error) {
	sv.reloadMu.Lock()
	defer sv.reloadMu.Unlock()
	sv.mu.Lock()
	var picked []*slot
	for k, sl := range sv.slots {
		if keep == nil || keep(k) {
			picked = append(picked, sl)
		}
	}
	sv.mu.Unlock()
	for _, sl := range picked {
		sv.mu.Lock()
		for !done(sl.ready) { // a start in progress finishes first
			ready := sl.ready
			sv.mu.Unlock()
			<-ready
			sv.mu.Lock()
		}
		old := sl.srv
		// From here calls wait for the restart instead of finding the
		// old server closed and starting one of their own beside it.
		sl.ready = make(chan struct{})
		sl.srv, sl.err = nil, nil
		sl.tainted = true // asked to restart it: never handed to another run
		sv.mu.Unlock()
		if old != nil && old.proc.alive() && !old.proc.isClosing() {
			old.proc.drain(reloadDrain)
			if old.proc.alive() { // else it died while draining: a crash, its watcher's
				old.proc.close()
				sv.metrics.SessionEnded(metrics.KindLSP, sv.run.Enclosure.Driver(), metrics.ReasonStopped)
			}
		}
		sv.mu.Lock()
		sl.crashes = 0
		sv.start(sl, 0, false) // a fresh server, not a parked one
		sv.mu.Unlock()
	}
	for _, sl := range picked {
		if _, err := sv.get(ctx, sl.m); err != nil {
			return picked, err
		}
	}
	return picked, nil
}

// release parks sl's server for the next run, or closes it, once its run
// has ended, waiting for a start in progress. A server that crashed,
// failed, was reloaded or is misconfigured is closed (parkable).
func (sv *supervisor) release(sl *slot, reason string) {
	sv.mu.Lock()
	ready := sl.ready
	sv.mu.Unlock()
	<-ready
	sv.mu.Lock()
	srv, tainted := sl.srv, sl.tainted
	sl.released = true
	sv.mu.Unlock()
	if srv == nil || srv.proc.isClosing() {
		return
	}
	if !srv.proc.alive() {
		// It went down just now (its connection ended, or its process),
		// and its watcher, which stands down once the slot is released,
		// may not have reaped it yet: what is left of it ends here.
		srv.proc.kill()
		return
	}
	if tainted || !sv.park(sl.m, srv) {
		srv.proc.close()
	}
	sv.metrics.SessionEnded(metrics.KindLSP, sv.run.Enclosure.Driver(), reason)
}

// has says whether the (root, server) of key was ever started.
func (sv *supervisor) has(key slotKey) bool {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	_, ok := sv.slots[key]
	return ok
}

// snapshot lists the slots, ordered by root and name.
func (sv *supervisor) snapshot() []*slot {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	out := make([]*slot, 0, len(sv.slots))
	for _, sl := range sv.slots {
		out = append(out, sl)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].key.root != out[j].key.root {
			return out[i].key.root < out[j].key.root
		}
		return out[i].key.name < out[j].key.name
	})
	return out
}

// Close parks or ends every server of the run (release) and waits for
// them.
func (sv *supervisor) Close() {
	sv.mu.Lock()
	sv.closed = true
	sv.mu.Unlock()
	var wg sync.WaitGroup
	for _, sl := range sv.snapshot() {
		wg.Go(func() { sv.release(sl, sv.run.SessionEndReason()) })
	}
	wg.Wait()
	close(sv.released)
	sv.wg.Wait()
}

// done says whether ch is closed, without waiting.
func done(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// firstLine is s up to its first newline.
func firstLine(s string) string {
	for i, r := range s {
		if r == '\n' {
			return s[:i]
		}
	}
	return s
}
