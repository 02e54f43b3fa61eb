package orchestrator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/orchestrator/state"
)

// Keeping is what keeps a run's processes across a restart of Berth
// (issue 29): the state directory, where each kept process has a record
// while it lives, and the grace its relay waits for a Berth to come back.
// A tool asks for it per process (enclosure.Cmd.Keep with its kind and
// role); Keeping fills in the token, the grace and the directory, and
// writes the record once the process started. Without a Keeping (nil:
// no state directory, or `orchestrator call`) nothing is kept.
type Keeping struct {
	Store *state.Store
	Grace time.Duration
	Log   *slog.Logger

	watch   sync.WaitGroup // one per record: removes it when its process ends
	once    sync.Once      // the one log line of a record that cannot be written
	runOnce sync.Once      // the one log line of a run that cannot be recorded

	mu   sync.Mutex              // guards live, and orders a record's writes and its removal
	live map[string]state.Record // the records of live processes, by tag: what Note rewrites
}

// DefaultReattachGrace is enclosure.reattach_grace's default.
const DefaultReattachGrace = 2 * time.Minute

// Close waits (up to a bound) for the records of processes that ended to
// be removed, then releases the state directory. Call it once every run
// has ended.
func (k *Keeping) Close() error {
	done := make(chan struct{})
	go func() { k.watch.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		k.Log.Warn("state: processes still live at the end: their records stay for a Berth given this state directory", "dir", k.Store.Dir())
	}
	return k.Store.Close()
}

// enclosure is enc with its starts of processes that ask to be kept
// recorded for run.
func (k *Keeping) enclosure(enc enclosure.Enclosure, run, conversation, workdir string) enclosure.Enclosure {
	return &keptEnclosure{Enclosure: enc, k: k, run: run, conversation: conversation, workdir: workdir}
}

// keptEnclosure records the processes started with Cmd.Keep.
type keptEnclosure struct {
	enclosure.Enclosure
	k                          *Keeping
	run, conversation, workdir string
}

// Check passes through to the enclosure's own (see timedEnclosure's).
func (e *keptEnclosure) Check(ctx context.Context) error {
	return enclosure.Check(ctx, e.Enclosure)
}

// Start starts cmd; with Keep, with the token, grace and directory of
// the state, and a record once the relay holds it.
func (e *keptEnclosure) Start(ctx context.Context, cmd enclosure.Cmd) (enclosure.Process, error) {
	if cmd.Keep == nil {
		return e.Enclosure.Start(ctx, cmd)
	}
	keep := *cmd.Keep
	keep.Token, keep.Grace, keep.Dir = newToken(), e.k.Grace, e.k.Store.RelayDir()
	cmd.Keep = &keep
	p, err := e.Enclosure.Start(ctx, cmd)
	if err != nil {
		return nil, err
	}
	kept, ok := p.(enclosure.Kept)
	if !ok {
		return p, nil
	}
	socket, tag, why := kept.Held()
	if socket == "" {
		e.k.Log.Debug("a process that asked to be kept is not", "kind", keep.Kind, "role", keep.Role, "why", why)
		return p, nil
	}
	e.k.record(state.Record{
		Run: e.run, Conversation: e.conversation, Workdir: e.workdir,
		Enclosure: state.Enclosure{Driver: e.Driver(), ID: e.ID()},
		Relay:     state.Relay{Tag: tag, Socket: socket, Token: keep.Token, Pid: p.Pid()},
		Kind:      keep.Kind, Role: keep.Role, Started: time.Now().UTC(),
	}, p)
	return p, nil
}

// record writes r and removes it when p ends. A record that cannot be
// written leaves p running, to be found by no Berth: its relay ends it
// after the grace should Berth go away.
func (k *Keeping) record(r state.Record, p enclosure.Process) {
	if err := k.Store.Put(r); err != nil {
		k.once.Do(func() {
			k.Log.Warn("state: a record could not be written, so this process would not be found after a restart (further failures are not logged)", "err", err)
		})
		return
	}
	k.watchRecord(r, p)
}

// Noter is an enclosure that keeps a family's data with the record of a
// kept process (the run's enclosure when Berth has a state directory).
type Noter interface {
	Note(proc enclosure.Process, data json.RawMessage) error
}

// Note keeps data (a JSON object) with the record of proc, a process the
// run's enclosure started with Cmd.Keep or one given back to the run
// after a restart: what its family needs to give it back (Resumer reads
// it as the record's Data). Each Note replaces the last, without
// waiting for the disk (state.Store.Rewrite). It does nothing
// when Berth keeps no state or proc is not kept; a process that ended
// has no record left to write.
func (r *Run) Note(proc enclosure.Process, data any) error {
	n, ok := r.Enclosure.(Noter)
	if !ok {
		return nil
	}
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	return n.Note(proc, b)
}

// Forgetter is an enclosure that can drop the record of a kept process
// (the run's enclosure when Berth has a state directory): a family whose
// record can no longer be kept true drops it, so that no Berth takes the
// process back on what it says. The process runs on; should Berth go
// away, its relay ends it after the grace.
type Forgetter interface {
	// Forget removes the record of proc, which could not be kept true
	// for the reason why (logged).
	Forget(proc enclosure.Process, why error) error
}

// Forget removes the record of proc.
func (e *keptEnclosure) Forget(proc enclosure.Process, why error) error {
	return e.k.forget(proc, why)
}

// Note rewrites the record of proc with data.
func (e *keptEnclosure) Note(proc enclosure.Process, data json.RawMessage) error {
	return e.k.note(proc, data)
}

// liveLocked is the tag and the record of proc when it is kept and its
// record is live (not ended, not forgotten). Called with mu.
func (k *Keeping) liveLocked(proc enclosure.Process) (string, state.Record, bool) {
	kept, ok := proc.(enclosure.Kept)
	if !ok {
		return "", state.Record{}, false
	}
	_, tag, _ := kept.Held()
	r, ok := k.live[tag]
	return tag, r, ok
}

func (k *Keeping) forget(proc enclosure.Process, why error) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	tag, _, ok := k.liveLocked(proc)
	if !ok {
		return nil
	}
	if err := k.Store.Remove(tag); err != nil {
		return err
	}
	delete(k.live, tag)
	k.Log.Warn("state: a record could not be kept true, so it was removed: its process runs on, but is not taken back after a restart; free space in the state directory or fix its permissions (state.dir)",
		"tag", tag, "err", why)
	return nil
}

func (k *Keeping) note(proc enclosure.Process, data json.RawMessage) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	tag, r, ok := k.liveLocked(proc)
	if !ok {
		return nil // not kept, or ended: its record is gone
	}
	r.Data = data
	if err := k.Store.Rewrite(r); err != nil {
		return err
	}
	k.live[tag] = r
	return nil
}

// putRun records run, live, for a Berth that comes back: its run/start
// of the run answers resumed even when no process of it was kept. A run
// that cannot be recorded is logged once, and starts anew after a
// restart.
func (k *Keeping) putRun(run *Run) {
	err := k.Store.PutRun(state.Run{Run: run.ID, Conversation: run.ConversationID, Workdir: run.Workdir,
		Enclosure: state.Enclosure{Driver: run.Enclosure.Driver(), ID: run.Enclosure.ID()}, Started: time.Now().UTC()})
	if err != nil {
		k.runOnce.Do(func() {
			k.Log.Warn("state: a run could not be recorded, so it would start anew after a restart (further failures are not logged)", "err", err)
		})
	}
}

// removeRun removes the record of the run id, which ended; a nil
// Keeping does nothing.
func (k *Keeping) removeRun(id string) {
	if k == nil {
		return
	}
	if err := k.Store.RemoveRun(id); err != nil {
		k.Log.Warn("state: an ended run's record could not be removed: a Berth given this state directory answers its run/start resumed until runs.disconnect_grace; fix the state directory's permissions (state.dir)",
			"run", id, "err", err)
	}
}

// newToken is a relay's token: 128 random bits in hex.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
