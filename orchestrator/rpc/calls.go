package rpc

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/berth-dev/berth/internal/errclass"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/state"
)

// The bounds of the call ids a Berth remembers: a harness retries a call
// within minutes, not days.
const (
	// MaxCallIDs is how many call ids are remembered; past it the oldest
	// is forgotten.
	MaxCallIDs = 10000
	// CallIDTTL is how long a call id is remembered after its call was
	// dispatched.
	CallIDTTL = time.Hour
)

// CallStore keeps the call ids across a restart of Berth: the state
// directory (*state.Store).
type CallStore interface {
	PutCall(state.Call) error
	RemoveCall(run, id string) error
}

// calls is what a Berth knows of the tools/call ids the harness gave
// (callId): each is recorded before its call is dispatched and again
// with its outcome, in memory and, with a CallStore, in the state
// directory, so that a call is never run twice, not even across a
// restart. The rule (docs/protocol.md#call-ids):
//
//   - an id never seen: the call runs;
//   - an id whose call is running: refused (conflict);
//   - an id used with another tool or other arguments: refused (conflict);
//   - an id whose call was answered: that answer again, if it was kept
//     (state.MaxCallAnswer), else refused (conflict) unless its tool is
//     of the read tier, which runs again;
//   - an id whose call has no known outcome (Berth restarted while it
//     ran, or it was cancelled or cut off by a handoff): refused
//     (outcome_unknown, "Berth restarted: the call's result is unknown")
//     unless its tool is of the read tier, which runs again.
type calls struct {
	store CallStore // nil: in memory only
	log   *slog.Logger
	now   func() time.Time
	max   int // MaxCallIDs

	mu    sync.Mutex
	byKey map[callKey]*callEntry
	order []callKey // oldest first; a key may be there after it was forgotten
	once  sync.Once // the one log line of a call that cannot be recorded
}

type callKey struct{ run, id string }

type callEntry struct {
	c state.Call
	// earlier: recorded by a Berth before this one.
	earlier bool
}

func newCalls(store CallStore, log *slog.Logger, earlier []state.Call) *calls {
	if log == nil {
		log = slog.Default()
	}
	cs := &calls{store: store, log: log, now: time.Now, max: MaxCallIDs, byKey: map[callKey]*callEntry{}}
	for _, c := range earlier {
		k := callKey{c.Run, c.ID}
		cs.byKey[k] = &callEntry{c: c, earlier: true}
		cs.order = append(cs.order, k)
	}
	cs.mu.Lock()
	cs.expire()
	cs.mu.Unlock()
	return cs
}

// callDigest is a digest of a call's tool and arguments (made canonical:
// a retry that orders its object's keys otherwise is the same call).
func callDigest(name string, args json.RawMessage) string {
	var v any
	canon := []byte(args)
	if json.Unmarshal(args, &v) == nil {
		if b, err := json.Marshal(v); err == nil {
			canon = b
		}
	}
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write(canon)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// begin records the call id of run before its call is dispatched. It
// returns the answer to send instead of running it (a kept answer of an
// earlier call with the id, or a refusal), or run true and end, which
// records its outcome.
func (cs *calls) begin(run, id, tool string, tier orchestrator.Tier, args json.RawMessage) (answer any, err error, end func(any, error, bool)) {
	k := callKey{run, id}
	digest := callDigest(tool, args)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.expire()
	if e, ok := cs.byKey[k]; ok {
		c := e.c
		when := c.Started.UTC().Format(time.RFC3339)
		switch {
		case c.Digest != digest:
			return nil, failf(errclass.ErrConflict, "callId %q of run %s was given at %s to another call (tool %s, or other arguments): give each call an id of its own", id, run, when, c.Tool), nil
		case c.Outcome == "" && !e.earlier:
			return nil, failf(errclass.ErrConflict, "callId %q of run %s is running (dispatched at %s): wait for its answer instead of sending it again", id, run, when), nil
		case (c.Outcome == "" || c.Outcome == state.CallUnknown) && tier != orchestrator.Read:
			why := "Berth restarted: the call's result is unknown"
			if !e.earlier || c.Outcome == state.CallUnknown {
				why = "the call was cut off while it ran (cancelled, or Berth handed off): its result is unknown"
			}
			return nil, failf(errclass.ErrOutcomeUnknown, "%s (callId %q, tool %s, dispatched at %s). It may or may not have taken effect: look at what it would have changed, then, if it is still wanted, send it with a new callId", why, id, c.Tool, when), nil
		case c.Outcome == state.CallOK && len(c.Answer) > 0:
			return json.RawMessage(c.Answer), nil, nil
		case c.Outcome == state.CallError && len(c.Answer) > 0:
			var e Error
			if json.Unmarshal(c.Answer, &e) == nil && e.Code != 0 {
				return nil, &e, nil
			}
		}
		if c.Outcome != "" && c.Outcome != state.CallUnknown && tier != orchestrator.Read {
			return nil, failf(errclass.ErrConflict, "callId %q of run %s was answered (%s) at %s, and its answer was too large to keep: send the call with a new callId to run it again", id, run, c.Outcome, c.Ended.UTC().Format(time.RFC3339)), nil
		}
		// A read: safe to run again, under the same id.
	}
	e := &callEntry{c: state.Call{Version: state.Version, Run: run, ID: id, Tool: tool, Digest: digest, Started: cs.now().UTC()}}
	if _, ok := cs.byKey[k]; ok {
		// Run again (a read): its place is now the newest.
		for i, o := range cs.order {
			if o == k {
				cs.order = append(cs.order[:i], cs.order[i+1:]...)
				break
			}
		}
	}
	cs.order = append(cs.order, k)
	cs.byKey[k] = e
	cs.put(e.c)
	return nil, nil, func(res any, err error, cut bool) { cs.end(k, e, res, err, cut) }
}

// end records the outcome of the call of k: its answer, or that it was
// cut off.
func (cs *calls) end(k callKey, e *callEntry, res any, err error, cut bool) {
	c := e.c
	c.Ended = cs.now().UTC()
	var answer []byte
	switch {
	case cut:
		c.Outcome = state.CallUnknown
	case err != nil:
		c.Outcome = state.CallError
		var re *Error
		if errors.As(err, &re) {
			answer, _ = json.Marshal(re)
		}
	default:
		c.Outcome = state.CallOK
		answer, _ = json.Marshal(res)
	}
	if len(answer) <= state.MaxCallAnswer {
		c.Answer = answer
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.byKey[k] != e {
		return // forgotten meanwhile
	}
	e.c = c
	cs.put(c)
}

// put writes c to the store, if any.
func (cs *calls) put(c state.Call) {
	if cs.store == nil {
		return
	}
	if err := cs.store.PutCall(c); err != nil {
		cs.once.Do(func() {
			cs.log.Warn("state: a call id could not be recorded, so a retry after a restart could run its call again (further failures are not logged)", "err", err)
		})
	}
}

// expire forgets the call ids past CallIDTTL, and the oldest past
// MaxCallIDs less one (room for the next). Called with mu held.
func (cs *calls) expire() {
	cutoff := cs.now().Add(-CallIDTTL)
	for len(cs.order) > 0 {
		k := cs.order[0]
		e, ok := cs.byKey[k]
		if ok && len(cs.byKey) < cs.max && e.c.Started.After(cutoff) {
			return
		}
		cs.order = cs.order[1:]
		if !ok {
			continue
		}
		delete(cs.byKey, k)
		if cs.store != nil {
			if err := cs.store.RemoveCall(k.run, k.id); err != nil {
				cs.log.Debug(err.Error())
			}
		}
	}
}
