package debug

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
	"github.com/berth-dev/berth/orchestrator/state"
)

// A launched session whose adapter talks over its stdio is kept across a
// restart of Berth (issue 29 item 3): its adapter is started with
// Cmd.Keep, so that its relay holds it, with the program, when Berth goes
// away without stopping it, and its record in the state directory keeps
// what a Berth that comes back needs to give the session back to its
// conversation (kept). That Berth re-reads the rest from the adapter:
// the threads, the stopped thread's frames, the breakpoints' answers.

// kept is a session's data in its record.
type kept struct {
	// Program is the program as the session shows it.
	Program string `json:"program"`
	// Launched is when it was launched: its time to live counts from it,
	// across restarts.
	Launched time.Time `json:"launched"`
	// Breakpoints are the conversation's stored breakpoints, by host path.
	Breakpoints map[string][]int `json:"breakpoints,omitempty"`
	// Stop is where the program stopped, nil while it runs: the adapter
	// says where a thread is, not whether it is stopped (debugpy answers
	// a running thread's stackTrace too).
	Stop *keptStop `json:"stop,omitempty"`
}

type keptStop struct {
	Thread      int    `json:"thread"`
	Reason      string `json:"reason,omitempty"`
	Description string `json:"description,omitempty"`
}

// keeper writes a kept session's record.
type keeper struct {
	s    *session
	note func(kept) error // run.Note for the adapter's process

	mu   sync.Mutex // orders the writes; guards what follows
	bps  map[string][]int
	last []byte // the data last written
	once sync.Once
}

// keepFor starts keeping s's record through run, with the conversation's
// stored breakpoints bps.
func (s *session) keepFor(run *orchestrator.Run, bps map[string][]int) {
	proc := s.link.proc
	if proc == nil {
		return
	}
	if _, ok := proc.(enclosure.Kept); !ok {
		return
	}
	if _, ok := run.Enclosure.(orchestrator.Noter); !ok {
		return // Berth keeps no state
	}
	k := &keeper{s: s, bps: bps, note: func(d kept) error { return run.Note(proc, d) }}
	s.keep.Store(k)
	k.save(nil)
}

// keepNow writes s's record now, with the conversation's stored
// breakpoints bps (nil: unchanged), if it is kept and changed: at the
// end of each operation, so that what an answer said survives a Berth
// killed right after it.
func (s *session) keepNow(bps map[string][]int) {
	if k := s.keep.Load(); k != nil && s.alive() {
		k.save(bps)
	}
}

// keepLater writes s's record soon: an event the reader applied changed
// where the program is.
func (s *session) keepLater() {
	if k := s.keep.Load(); k != nil {
		go k.save(nil)
	}
}

func (k *keeper) save(bps map[string][]int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if bps != nil {
		k.bps = bps
	}
	d := kept{Program: k.s.program, Launched: k.s.started.UTC(), Breakpoints: k.bps}
	if st := k.s.state.current(); st != nil {
		d.Stop = &keptStop{Thread: st.threadID, Reason: st.reason, Description: st.description}
	}
	b, err := json.Marshal(d)
	if err != nil || bytes.Equal(b, k.last) {
		return
	}
	if err := k.note(d); err != nil {
		k.once.Do(func() {
			slog.Warn("debug: the session's record could not be written: a Berth that comes back may not find it as it is (further failures are not logged)",
				"program", k.s.program, "err", err)
		})
		return
	}
	k.last = b
}

var _ orchestrator.Resumer = (*Provider)(nil)

// Resume gives run's conversation back the debug session a Berth before
// this one launched and left to its relay (issue 29 item 3): proc is its
// adapter, rec.Role its adapter's id, rec.Data its record (kept). The
// session keeps its time to live from its launch (one that passed while
// Berth was away is ended, not resumed, and the conversation's status
// says so), the conversation its stored breakpoints, and the adapter its
// program where it was: the stopped thread's frames and the breakpoints'
// answers are read again from the adapter, which is never launched again.
func (p *Provider) Resume(run *orchestrator.Run, rec state.Record, proc enclosure.Process) error {
	var d kept
	dec := json.NewDecoder(bytes.NewReader(rec.Data))
	dec.DisallowUnknownFields()
	if len(rec.Data) == 0 {
		return errors.New("its record holds no debug session (Berth went away during its launch)")
	}
	if err := dec.Decode(&d); err != nil || d.Launched.IsZero() {
		return fmt.Errorf("its record's data is not a debug session's (%v)", err)
	}
	var a *Adapter
	for i := range p.cfg.Adapters {
		if p.cfg.Adapters[i].ID == rec.Role {
			a = &p.cfg.Adapters[i]
		}
	}
	switch {
	case a == nil:
		return fmt.Errorf("its adapter %q is not in debug.adapters", rec.Role)
	case a.Transport != "stdio":
		return fmt.Errorf("its adapter %s is reached over %s, which no Berth takes back", a.ID, a.Transport)
	case run.ConversationID == "" || run.Workdir == "":
		return errors.New("its run has no conversation id or no working directory")
	}
	c, err := p.join(run)
	if err != nil {
		return err
	}
	c.lock <- struct{}{}
	defer func() { <-c.lock }()
	if err := p.refuseSecond(c); err != nil {
		return err
	}
	// Breakpoints are stored inside the working directory, by their
	// resolved path: a record that names another file was not Berth's.
	for f, lines := range d.Breakpoints {
		if filepath.IsAbs(f) && filepath.Clean(f) == f && strings.HasPrefix(f, run.Workdir+string(filepath.Separator)) {
			c.setLines(f, positive(lines))
		}
	}
	program := text.Path(d.Program)
	if len(program) > maxProgram {
		cut := maxProgram
		for cut > 0 && !utf8.RuneStart(program[cut]) {
			cut--
		}
		program = program[:cut] + "…"
	}
	s, err := p.newSessionFor(run, c, a, program)
	if err != nil {
		return err
	}
	s.started = d.Launched
	left := p.cfg.SessionTTL - time.Since(d.Launched)
	if left <= 0 {
		// Its own end, not counted: the Berth before counted it live.
		s.mu.Lock()
		s.reason, s.detail = metrics.ReasonTTL, fmt.Sprintf("its time to live (%s) passed while Berth was away", p.cfg.SessionTTL)
		s.mu.Unlock()
		s.endOnce.Do(func() {
			p.mu.Lock()
			c.sess, c.last = nil, s
			p.mu.Unlock()
			close(s.ended)
		})
		return fmt.Errorf("the debug session of %s: its time to live (%s) passed while Berth was away: it is ended, not resumed", program, p.cfg.SessionTTL)
	}
	if d.Stop != nil {
		s.state.stop = &stopState{threadID: d.Stop.Thread, reason: d.Stop.Reason, description: d.Stop.Description,
			shownFrames: map[int]bool{}, shownRefs: map[int]bool{}}
	}
	s.link.resume(proc, s.onEvent)
	s.supervise(left)
	ctx, cancel := context.WithTimeout(run.Context(), p.cfg.RequestWait)
	defer cancel()
	if err := s.reread(ctx, c.storedBreakpoints()); err != nil {
		s.end(metrics.ReasonCrashed, "it could not be read again from its adapter after Berth restarted: "+err.Error())
		return fmt.Errorf("the debug session of %s could not be read again from its adapter: %w", program, err)
	}
	s.mu.Lock()
	s.live = true
	s.mu.Unlock()
	s.metrics.SessionResumed(metrics.KindDebug, s.link.driver)
	s.keepFor(run, c.storedBreakpoints())
	return nil
}

// reread reads again from the adapter what a session taken back after a
// restart shows: the threads, the stopped thread's top frame (a stop
// whose thread is gone is forgotten), and the adapter's answer for each
// stored breakpoint, sent again.
func (s *session) reread(ctx context.Context, bps map[string][]int) error {
	ts, err := s.link.threadList(ctx)
	if err != nil {
		return fmt.Errorf("threads: %w", err)
	}
	if st := s.state.current(); st != nil {
		alive := false
		for _, t := range ts {
			alive = alive || t.Id == st.threadID
		}
		if !alive {
			s.state.resumed(st)
		} else {
			frames, _, err := s.link.frames(ctx, st.threadID, 1)
			if err != nil {
				return fmt.Errorf("stackTrace: %w", err)
			}
			s.state.fetched(st, st.threadID, frames)
		}
	}
	if err := s.sendBreakpoints(ctx, bps); err != nil {
		return fmt.Errorf("setBreakpoints: %w", err)
	}
	return nil
}

// maxProgram bounds the program's name a resumed session shows.
const maxProgram = 1024

// positive is lines without those below 1.
func positive(lines []int) []int {
	var out []int
	for _, l := range lines {
		if l > 0 {
			out = append(out, l)
		}
	}
	return out
}
