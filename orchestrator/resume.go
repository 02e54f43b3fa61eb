package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/internal/errclass"
	"github.com/berth-dev/berth/orchestrator/metrics"
	"github.com/berth-dev/berth/orchestrator/state"
)

// Resumer gives a process a Berth took back after a restart to the run
// that resumes it: a tool family's own (the kernels register theirs for
// the kind "kernel"). Resume owns proc from its call: on an error, the
// caller kills it.
type Resumer interface {
	Resume(run *Run, rec state.Record, proc enclosure.Process) error
}

// Taker takes a process a Berth took back after a restart at once, for
// no run: a family whose processes outlive their runs (language servers,
// parked for the next run on the same enclosure and root). enc is the
// process's enclosure, as a run's would be: it notes the process's record
// (Noter). Take owns proc from its call: on an error, the caller kills
// it, and the error says why it was not kept.
type Taker interface {
	Take(enc enclosure.Enclosure, rec state.Record, proc enclosure.Process) error
}

// pending is what a Berth took back at start for one run, waiting for a
// run/start with the same run id.
type pending struct {
	run   state.Run // its ids, workdir and enclosure, which run/start must match
	recs  []state.Record
	procs []enclosure.Process
	timer *time.Timer // ends them at runs.disconnect_grace
}

// reattachWait bounds the reattach of one record at start.
const reattachWait = 5 * time.Second

// Reattach takes back, at start, the processes the state's records name
// (a Berth that went away without stopping them left them to their
// relays). Each is then, by its kind and enclosure:
//
//   - pending for its run: a run/start with the same run id,
//     conversation, workdir and enclosure gets it back (Start, with
//     Resumed set), else it is ended after unclaimed (runs.disconnect_grace);
//   - taken at once by its kind's Taker (a language server, parked);
//   - ended at once when no Berth resumes its kind yet;
//   - forgotten when its relay does not answer (or refuses the token).
//
// Every record is removed once its process ended. It returns at once
// for a Berth without a state directory.
func (rs *Runs) Reattach(ctx context.Context, records []state.Record, unclaimed time.Duration) {
	if rs.Keeping == nil {
		return
	}
	// Every run the Berth before had is pending, those with no kept
	// process too: a run/start of it answers resumed, and its tools say
	// what the restart lost.
	runs, bad := rs.Keeping.Store.Runs()
	for _, err := range bad {
		rs.Keeping.Log.Warn(err.Error())
	}
	for _, r := range runs {
		rs.mu.Lock()
		rs.pendingLocked(r, unclaimed)
		rs.mu.Unlock()
	}
	var wg sync.WaitGroup
	for _, rec := range records {
		wg.Go(func() { rs.reattach(ctx, rec, unclaimed) })
	}
	wg.Wait()
}

func (rs *Runs) reattach(ctx context.Context, rec state.Record, unclaimed time.Duration) {
	k := rs.Keeping
	log := k.Log.With("run", rec.Run, "kind", rec.Kind, "role", rec.Role, "enclosure", rec.Enclosure.Driver+" "+rec.Enclosure.ID, "tag", rec.Relay.Tag)
	forget := func(outcome, why string) {
		rs.metrics.Reattached(rec.Kind, outcome)
		log.Warn("state: a kept process is not taken back: "+why, "outcome", outcome)
		if err := k.Store.Remove(rec.Relay.Tag); err != nil {
			log.Warn(err.Error())
		}
	}
	var (
		r   enclosure.Reattacher
		enc enclosure.Enclosure
		dir string
	)
	switch {
	case rs.lookup == nil:
	case rec.Enclosure.Driver == "host":
		if enc = rs.lookup.Host; enc != nil {
			r, _ = enc.(enclosure.Reattacher)
		}
		// A host relay listens in this state directory, nowhere else:
		// a record that says otherwise was not written by Berth.
		if filepath.Dir(rec.Relay.Socket) != k.Store.RelayDir() {
			forget(metrics.ReattachLost, fmt.Sprintf("its socket %s is not in the state directory's relays/", rec.Relay.Socket))
			return
		}
	default:
		// A container's: attached from the record as run/start attaches
		// it; its relay passes the process on through a stdio socket in
		// the run's workdir, as the container sees it.
		actx, cancel := context.WithTimeout(ctx, reattachWait)
		var err error
		enc, err = rs.lookup.Find(actx, enclosure.Spec{Driver: rec.Enclosure.Driver, ID: rec.Enclosure.ID}, rec.Conversation)
		cancel()
		if err != nil {
			forget(metrics.ReattachLost, "its enclosure cannot be attached: "+err.Error())
			return
		}
		if dir, err = enc.MapPath(rec.Workdir); err != nil {
			forget(metrics.ReattachLost, "its enclosure does not see the run's workdir: "+err.Error())
			return
		}
		r, _ = enc.(enclosure.Reattacher)
	}
	if r == nil {
		// Its relay ends it after enclosure.reattach_grace, as if no
		// Berth had come back.
		forget(metrics.ReattachStopped, "no Berth takes back a process in a "+rec.Enclosure.Driver+" enclosure; its relay ends it after enclosure.reattach_grace")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, reattachWait)
	defer cancel()
	proc, err := r.Reattach(ctx, enclosure.Hold{Socket: rec.Relay.Socket, Token: rec.Relay.Token, Dir: dir})
	if err != nil {
		outcome := metrics.ReattachLost
		if errors.Is(err, enclosure.ErrHoldExpired) {
			outcome = metrics.ReattachExpired
		}
		forget(outcome, err.Error())
		return
	}
	k.watchRecord(rec, proc)
	if t := rs.Takers[rec.Kind]; t != nil {
		kept := k.enclosure(rs.metrics.Enclosure(enc), rec.Run, rec.Conversation, rec.Workdir)
		if err := t.Take(kept, rec, proc); err != nil {
			rs.metrics.Reattached(rec.Kind, metrics.ReattachStopped)
			log.Info("state: a kept process was taken back and ended: " + err.Error())
			_ = proc.Kill()
			return
		}
		rs.metrics.Reattached(rec.Kind, metrics.ReattachParked)
		log.Info("state: a kept process was taken back and parked for the next run on its enclosure and root")
		return
	}
	if rs.Resumers[rec.Kind] == nil {
		rs.metrics.Reattached(rec.Kind, metrics.ReattachStopped)
		log.Info("state: a kept process of a kind no Berth resumes yet is ended")
		_ = proc.Kill()
		return
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	p := rs.pendingLocked(state.Run{Run: rec.Run, Conversation: rec.Conversation, Workdir: rec.Workdir, Enclosure: rec.Enclosure}, unclaimed)
	p.recs = append(p.recs, rec)
	p.procs = append(p.procs, proc)
	log.Info("state: a kept process was taken back; a run/start of its run resumes it", "within", unclaimed)
}

// pendingLocked is what is pending for r's run, made (to be ended after
// unclaimed) when nothing was. Called with mu.
func (rs *Runs) pendingLocked(r state.Run, unclaimed time.Duration) *pending {
	p := rs.pending[r.Run]
	if p == nil {
		p = &pending{run: r}
		p.timer = time.AfterFunc(unclaimed, func() { rs.unclaimed(r.Run, p) })
		rs.pending[r.Run] = p
	}
	return p
}

// unclaimed ends what was taken back for run when no run/start claimed
// it in time, as the runs of a connection that went away are ended.
func (rs *Runs) unclaimed(run string, p *pending) {
	rs.mu.Lock()
	if rs.pending[run] != p {
		rs.mu.Unlock()
		return
	}
	delete(rs.pending, run)
	// Under the lock: a run/start of the id just after writes its own.
	rs.Keeping.removeRun(run)
	rs.mu.Unlock()
	for i, proc := range p.procs {
		rs.metrics.Reattached(p.recs[i].Kind, metrics.ReattachUnclaimed)
		_ = proc.Kill()
	}
}

// claim returns what was taken back for run id, removed from pending,
// if its records match the run/start: the same conversation, workdir
// and enclosure. A mismatch is an error saying what differs, and leaves
// it pending.
func (rs *Runs) claim(id, conversation, workdir string, enc enclosure.Enclosure) (*pending, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	p := rs.pending[id]
	if p == nil {
		return nil, nil
	}
	rec := p.run
	var differ []string
	if rec.Conversation != conversation {
		differ = append(differ, fmt.Sprintf("conversation %q, not %q", rec.Conversation, conversation))
	}
	if rec.Workdir != workdir {
		differ = append(differ, fmt.Sprintf("workdir %s, not %s", rec.Workdir, workdir))
	}
	if rec.Enclosure.Driver != enc.Driver() || rec.Enclosure.ID != enc.ID() {
		differ = append(differ, fmt.Sprintf("enclosure %s %s, not %s %s", rec.Enclosure.Driver, rec.Enclosure.ID, enc.Driver(), enc.ID()))
	}
	if len(differ) > 0 {
		return nil, fmt.Errorf("run %q is being resumed from before Berth restarted, with %s: start it with the same to get it back, or use another runId: %w", id, strings.Join(differ, ", "), errclass.ErrConflict)
	}
	delete(rs.pending, id)
	p.timer.Stop()
	return p, nil
}

// resume gives run what was taken back for it, each process to its
// kind's resumer; one that fails is ended and logged.
func (rs *Runs) resume(run *Run, p *pending) {
	for i, proc := range p.procs {
		rec := p.recs[i]
		err := rs.Resumers[rec.Kind].Resume(run, rec, proc)
		if err == nil {
			rs.metrics.Reattached(rec.Kind, metrics.ReattachResumed)
			continue
		}
		rs.metrics.Reattached(rec.Kind, metrics.ReattachUnclaimed)
		rs.Keeping.Log.Warn("state: a kept process could not be given back to its run: ended", "run", run.ID, "kind", rec.Kind, "role", rec.Role, "err", err)
		_ = proc.Kill()
	}
}

// endPendingOf ends what was claimed and then could not be given back.
func (rs *Runs) endPendingOf(p *pending) {
	for _, proc := range p.procs {
		_ = proc.Kill()
	}
}

// endPending ends what is still pending (Berth is stopping in order).
func (rs *Runs) endPending() {
	rs.mu.Lock()
	all := rs.pending
	rs.pending = map[string]*pending{}
	rs.mu.Unlock()
	for id, p := range all {
		p.timer.Stop()
		rs.endPendingOf(p)
		rs.Keeping.removeRun(id)
	}
}

// watchRecord keeps rec, proc's record, for Note while proc lives, and
// removes it when proc ends.
func (k *Keeping) watchRecord(rec state.Record, proc enclosure.Process) {
	tag := rec.Relay.Tag
	k.mu.Lock()
	if k.live == nil {
		k.live = map[string]state.Record{}
	}
	k.live[tag] = rec
	k.mu.Unlock()
	k.watch.Go(func() {
		<-proc.Done()
		k.mu.Lock()
		defer k.mu.Unlock()
		delete(k.live, tag)
		if err := k.Store.Remove(tag); err != nil {
			k.Log.Warn("state: a record outlives its process", "err", err)
		}
	})
}
