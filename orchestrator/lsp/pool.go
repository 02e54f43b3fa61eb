package lsp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.lsp.dev/protocol"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// pool keeps the language servers whose run ended, parked, so that the
// next run on the same enclosure, workdir and root adopts one instead of
// starting one cold (issue 28 item 2). A parked server belongs to no run:
// it has no open document, reads the workdir through a workspace root of
// the pool's own, and ends when lsp.keep_warm has passed since it was
// parked, when a cap ends the oldest, when its process ends, or when
// Berth stops. A server belongs to one run or to the pool, never to two
// at once: adopt takes it out under the pool's lock.
//
// Its lock guards the list; ending a server (which waits for its
// process) happens outside it, in goroutines the pool waits for at
// shutdown.
type pool struct {
	conf    Config
	metrics *metrics.Metrics

	mu     sync.Mutex
	parked []*parkedServer // oldest first
	rss    int64           // the parked servers' memory, as read
	closed bool
	wg     sync.WaitGroup // ends, watchers and memory reads
}

// parkKey is what a run must share with the run that parked a server to
// adopt it: the enclosure, the workdir and root, the server's command
// line, its catalog entry, and who the enclosure runs it as through which
// relay (Capabilities). The environment is the enclosure's own (a
// container's, or Berth's less env.drop on the host), the same for every
// process it starts: Berth adds none to a server's.
type parkKey struct {
	driver, id    string // the enclosure
	workdir, root string
	name          string
	command       string // the resolved executable and its arguments
	config        string // a digest of its catalog entry
	identity      string // the enclosure's user and relay version
}

// keyOf is the park key of a server for m started in run's enclosure.
func keyOf(run *orchestrator.Run, m match) parkKey {
	return parkKey{
		driver: run.Enclosure.Driver(), id: run.Enclosure.ID(),
		workdir: run.Workdir, root: m.root, name: m.cfg.Name,
		command:  strings.Join(append([]string{m.exe}, m.cfg.Command[1:]...), "\x00"),
		config:   configDigest(m.cfg),
		identity: identityOf(run.Enclosure),
	}
}

// parkedServer is one server in the pool.
type parkedServer struct {
	key      parkKey
	srv      *server
	ws       *workspace.Root // the pool's, which the server reads through while parked
	known    baseline        // what it knows of its files
	at       time.Time
	deadline time.Time
	rss      int64 // bytes: estimated until read (measured), 0 when it cannot be
	measured bool
	timer    *time.Timer
	left     chan struct{} // closed when it leaves the pool, adopted or ended
}

// newPool is the pool of a provider.
func newPool(conf Config, m *metrics.Metrics) *pool {
	return &pool{conf: conf, metrics: m}
}

// on says whether servers are parked at all (lsp.keep_warm).
func (p *pool) on() bool { return p.conf.KeepWarm > 0 }

// park takes srv, whose run has ended, into the pool: its documents are
// closed first, and it reads the workdir through a root of the pool's
// own from here. It says whether srv was parked; when it was not (the
// pool is off or closed, its documents could not be closed, the workdir
// is gone), the caller ends srv.
func (p *pool) park(key parkKey, srv *server) bool {
	if !p.on() {
		return false
	}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return false
	}
	// The run's root closes with the run: from here the server reads
	// the workdir through the pool's.
	ws, err := workspace.NewWith(key.workdir, workspace.Options{View: srv.paths.encl})
	if err != nil {
		return false
	}
	srv.paths.bind(ws)
	err = srv.closeDocuments(parkTimeout)
	if err != nil || !srv.proc.alive() {
		ws.Close()
		return false
	}
	return p.put(key, srv, ws, baseline{stamps: stampFiles(key.root, srv.cfg)}, p.conf.KeepWarm)
}

// put parks srv, its documents closed and reading the workdir through
// ws (which it closes when srv is not parked), for left, knowing its
// files as known says; it says whether srv was parked.
func (p *pool) put(key parkKey, srv *server, ws *workspace.Root, known baseline, left time.Duration) bool {
	now := time.Now()
	ps := &parkedServer{key: key, srv: srv, ws: ws, known: known, at: now, deadline: now.Add(left), left: make(chan struct{})}
	// Recorded first: a Berth that comes back after a crash parks it
	// again for what is left of its time, with what it knew of the files.
	reopen, _ := srv.reopenList()
	srv.keep.Load().parked(ps.deadline, known, reopen)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		ws.Close()
		return false
	}
	// Until its own memory is read (measure, an exec in a container), it
	// counts as much as the largest parked server of its kind: the cap
	// holds from the moment it is parked, not only once that read ends.
	ps.rss = p.estimateLocked(key.name)
	p.rss += ps.rss
	p.metrics.LSPParkedRSS.Set(float64(p.rss))
	p.parked = append(p.parked, ps)
	p.metrics.LSPParked.WithLabelValues(key.driver).Inc()
	ps.timer = time.AfterFunc(left, func() { p.end(ps, metrics.ParkedExpired) })
	victims := p.trimLocked()
	p.wg.Add(2) // watch and measure
	p.mu.Unlock()
	// The servers the memory cap ended are gone before the run's end
	// returns (a kill: milliseconds), so that the memory of the parked
	// ones stays under the cap even in that moment; the others end in
	// the background.
	var later []victim
	for _, v := range victims {
		if v.reason != metrics.ParkedMemory {
			later = append(later, v)
			continue
		}
		p.stop(v.ps, v.reason)
		p.wg.Done()
	}
	p.finish(later)
	go p.watch(ps)
	go p.measure(ps)
	return true
}

// parkTimeout bounds closing a server's documents before it is parked.
const parkTimeout = 5 * time.Second

// watch ends ps when its process ends while it is parked.
func (p *pool) watch(ps *parkedServer) {
	defer p.wg.Done()
	select {
	case <-ps.srv.proc.exited:
	case <-ps.srv.proc.conn.Done():
	case <-ps.left:
		return
	}
	p.end(ps, metrics.ParkedExited)
}

// measure reads ps's resident memory, through its enclosure
// (enclosure.Resident), and ends the oldest servers while the parked
// ones are over lsp.max_parked_rss_bytes. A process whose memory cannot
// be read counts nothing.
func (p *pool) measure(ps *parkedServer) {
	defer p.wg.Done()
	r, ok := ps.srv.proc.handle.(enclosure.Resident)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), measureTimeout)
	n, err := r.RSS(ctx)
	cancel()
	if err != nil || n <= 0 {
		n = 0 // counts nothing, its estimate neither
	}
	p.mu.Lock()
	if !slices.Contains(p.parked, ps) {
		p.mu.Unlock()
		return
	}
	p.rss += n - ps.rss
	ps.rss, ps.measured = n, true
	p.metrics.LSPParkedRSS.Set(float64(p.rss))
	victims := p.trimLocked()
	p.mu.Unlock()
	p.finish(victims)
}

// measuredRSS is ps's memory as read, 0 until it is.
func (ps *parkedServer) measuredRSS() int64 {
	if !ps.measured {
		return 0
	}
	return ps.rss
}

// estimateLocked is what a newly parked server of the entry name counts
// until its memory is read: the largest read of a parked one of its
// kind, 0 when there is none. Called with mu.
func (p *pool) estimateLocked(name string) int64 {
	var n int64
	for _, ps := range p.parked {
		if ps.key.name == name && ps.measured {
			n = max(n, ps.rss)
		}
	}
	return n
}

// measureTimeout bounds reading a parked server's memory.
const measureTimeout = 10 * time.Second

// victim is a server the caps took out of the pool, to be ended.
type victim struct {
	ps     *parkedServer
	reason string
}

// trimLocked takes out of the pool, oldest first, the servers past the
// caps: per enclosure, in all, and in memory, and counts them in wg.
// Called with mu; the caller ends them (finish) after unlocking.
func (p *pool) trimLocked() []victim {
	var out []victim
	perEnclosure := map[[2]string]int{}
	for _, ps := range p.parked {
		perEnclosure[[2]string{ps.key.driver, ps.key.id}]++
	}
	for _, ps := range slices.Clone(p.parked) {
		k := [2]string{ps.key.driver, ps.key.id}
		if perEnclosure[k] > p.conf.MaxParkedPerEnclosure {
			perEnclosure[k]--
			p.endLocked(ps, metrics.ParkedCapped)
			out = append(out, victim{ps, metrics.ParkedCapped})
		}
	}
	for len(p.parked) > p.conf.MaxParked {
		ps := p.parked[0]
		p.endLocked(ps, metrics.ParkedCapped)
		out = append(out, victim{ps, metrics.ParkedCapped})
	}
	for p.conf.MaxParkedRSSBytes > 0 && p.rss > p.conf.MaxParkedRSSBytes && len(p.parked) > 0 {
		ps := p.parked[0]
		p.endLocked(ps, metrics.ParkedMemory)
		out = append(out, victim{ps, metrics.ParkedMemory})
	}
	p.wg.Add(len(out))
	return out
}

// endLocked takes ps out of the pool to be ended for reason, counted
// now. Called with mu.
func (p *pool) endLocked(ps *parkedServer, reason string) {
	p.takeLocked(ps)
	p.metrics.LSPParkedEnds.WithLabelValues(reason).Inc()
}

// takeLocked takes ps out of the pool (it is there). Called with mu.
func (p *pool) takeLocked(ps *parkedServer) {
	p.parked = slices.DeleteFunc(p.parked, func(x *parkedServer) bool { return x == ps })
	p.rss -= ps.rss
	p.metrics.LSPParked.WithLabelValues(ps.key.driver).Dec()
	p.metrics.LSPParkedRSS.Set(float64(p.rss))
	ps.timer.Stop()
	close(ps.left)
}

// finish ends the servers taken out of the pool, in the background;
// each was counted in wg when it was taken out, under the lock, so that
// shutdown waits for it.
func (p *pool) finish(vs []victim) {
	for _, v := range vs {
		go func() {
			defer p.wg.Done()
			p.stop(v.ps, v.reason)
		}()
	}
}

// end takes ps out of the pool, if it is still there, and ends it.
func (p *pool) end(ps *parkedServer, reason string) {
	p.mu.Lock()
	if !slices.Contains(p.parked, ps) {
		p.mu.Unlock()
		return // adopted, or ended already
	}
	p.endLocked(ps, reason)
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()
	p.stop(ps, reason)
}

// stop ends a server taken out of the pool.
func (p *pool) stop(ps *parkedServer, reason string) {
	// An exited server is reaped; one past the memory cap is killed at
	// once, as a shutdown's grace would hold its memory a second more
	// (a parked server has no open document, nothing of a run's to save).
	if reason == metrics.ParkedExited || reason == metrics.ParkedMemory {
		ps.srv.proc.kill()
	} else {
		ps.srv.proc.close()
	}
	ps.ws.Close()
}

// adopt takes out of the pool the newest live server parked under key,
// tells it what changed on disk while it was parked, and has it read the
// workdir through ws (the adopting run's root) from here; it says how
// long the server was parked. nil when there is none (or the one there
// was did not take the news: it is ended).
func (p *pool) adopt(key parkKey, ws *workspace.Root) (*server, time.Duration) {
	p.mu.Lock()
	var ps *parkedServer
	for i := len(p.parked) - 1; i >= 0; i-- {
		if x := p.parked[i]; x.key == key && x.srv.proc.alive() && !x.srv.proc.isClosing() {
			ps = x
			break
		}
	}
	if ps == nil {
		p.mu.Unlock()
		return nil, 0
	}
	p.takeLocked(ps)
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), parkTimeout)
	err := ps.srv.tellChanges(ctx, ps.known.changes(stampFiles(ps.key.root, ps.srv.cfg)))
	cancel()
	if err != nil {
		p.metrics.LSPParkedEnds.WithLabelValues(metrics.ParkedExited).Inc()
		p.stop(ps, metrics.ParkedExited)
		return nil, 0
	}
	ps.srv.paths.bind(ws)
	ps.ws.Close()
	ps.srv.keep.Load().adopted()
	return ps.srv, time.Since(ps.at)
}

// shutdown ends every parked server, all at once, and parks nothing more
// (Berth is stopping).
func (p *pool) shutdown() {
	p.mu.Lock()
	p.closed = true
	var vs []victim
	for _, ps := range slices.Clone(p.parked) {
		p.endLocked(ps, metrics.ParkedShutdown)
		vs = append(vs, victim{ps, metrics.ParkedShutdown})
	}
	p.wg.Add(len(vs))
	p.mu.Unlock()
	p.finish(vs)
	p.wg.Wait()
}

// parkedInfo is one parked server as status shows it.
type parkedInfo struct {
	name, root string // root as the enclosure sees it
	process    string // enclosure.Describe
	parked     time.Duration
	left       time.Duration
	rss        int64
}

// list describes the servers parked in the enclosure driver/id, oldest
// first.
func (p *pool) list(driver, id string) []parkedInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []parkedInfo
	now := time.Now()
	for _, ps := range p.parked {
		if ps.key.driver != driver || ps.key.id != id {
			continue
		}
		out = append(out, parkedInfo{name: ps.key.name, root: ps.srv.paths.mapPath(ps.key.root),
			process: enclosure.Describe(ps.srv.proc.handle), parked: now.Sub(ps.at), left: ps.deadline.Sub(now), rss: ps.measuredRSS()})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].parked > out[j].parked })
	return out
}

// closeDocuments tells the server every document it has open is closed
// and forgets them, within timeout once no sync is under way, so that the
// run that adopts it starts with none. Up to lsp.reopen_max documents are
// kept for that run to reopen (reopen): those the ending run used, the
// most recent first (recent), then those of the list it inherited that it
// did not (a reopen cut short by the run's end, an adoption at a call).
// A reopen still under way for the run that ends opens nothing more.
func (s *server) closeDocuments(timeout time.Duration) error {
	s.docs.order.Lock()
	defer s.docs.order.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s.docs.epoch++
	s.docs.reopen = firstOf(s.conf.ReopenMax, s.docs.recent(s.conf.ReopenMax), s.docs.reopen)
	for _, abs := range s.docs.paths("") {
		s.docs.forget(abs)
		err := s.proc.api.DidClose(ctx, &protocol.DidCloseTextDocumentParams{TextDocument: protocol.TextDocumentIdentifier{URI: s.paths.toURI(abs)}})
		if err != nil {
			return fmt.Errorf("closing %s: %w", s.paths.rel(abs), err)
		}
	}
	return nil
}

// reopenList is the list of documents the run that adopts the server
// reopens (closeDocuments, or a record's: Take), with the epoch its
// reopen must find. The list stays the server's, for the next parking to
// keep what this run does not reopen.
func (s *server) reopenList() ([]string, uint64) {
	s.docs.order.Lock()
	defer s.docs.order.Unlock()
	return slices.Clone(s.docs.reopen), s.docs.epoch
}

// openQuietlyLocked opens abs for Berth's own ends (a reopen, a
// warm-up), unless something has it open already, and says whether it
// did. The open has a time of its own (parkTimeout) rather than ctx, so
// that the run's end does not cut a message in two. Called with
// docs.order.
func (s *server) openQuietlyLocked(ctx context.Context, abs string) (bool, error) {
	if s.docs.has(abs) {
		return false, nil
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), parkTimeout)
	defer cancel()
	_, err := s.syncLocked(sctx, abs, false)
	return err == nil, err
}

// closeLocked tells the server abs is closed, if it was open, forgets it
// and updates the server's record of its open documents. Called with
// docs.order.
func (s *server) closeLocked(ctx context.Context, abs string) error {
	if !s.docs.forget(abs) {
		return nil
	}
	err := s.proc.api.DidClose(ctx, &protocol.DidCloseTextDocumentParams{TextDocument: protocol.TextDocumentIdentifier{URI: s.paths.toURI(abs)}})
	_ = s.keep.Load().opened(s) // a failure leaves more listed, which is safe
	return err
}

// reopen opens paths again, in order, for the run that adopted the
// server at epoch, and returns those it opened: it stops when that run
// ends (ctx), when the server has been parked since (the epoch moved on)
// or at the first error other than a file gone. A file a call opened
// meanwhile is left as it is (openQuietlyLocked); the parking that
// follows closes what it opened, as any open document.
func (s *server) reopen(ctx context.Context, paths []string, epoch uint64) []string {
	var opened []string
	for i, abs := range paths {
		if ctx.Err() != nil {
			break
		}
		s.docs.order.Lock()
		if s.docs.epoch != epoch {
			s.docs.order.Unlock()
			break
		}
		ok, err := s.openQuietlyLocked(ctx, abs)
		s.docs.order.Unlock()
		if ok {
			s.docs.ranked(abs, i+1)
			opened = append(opened, abs)
		} else if err != nil && !errors.Is(err, errGone) {
			break
		}
	}
	return opened
}
