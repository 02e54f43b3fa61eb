package debug

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/google/go-dap"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

// session is one debug session: an adapter process (none for attach,
// where the debuggee's own adapter listens on a port), its DAP client, and
// what the adapter's events have said.
//
// Goroutines, after delve's service/dap/server.go:
//
//   - The reader (client.read) is the only reader of the adapter's stream.
//     It applies each event to the session's state (onEvent, under mu),
//     then hands it to the waiters registered for it, and routes each
//     response to its request by request_seq. It never sends a request and
//     never waits on a caller; when the stream ends or breaks it closes the
//     client's done channel, which ends every pending wait.
//   - The caller is one tool operation at a time (the conversation's
//     operation lock serialises them). It registers a waiter before each
//     request that causes an event, sends, and waits, every wait bounded
//     (RequestWait, StopWait, BuildWait) and cut short by the reader
//     stopping or by the session ending.
//   - Enders: the TTL timer, the reader's watcher (the stream ended) and
//     the terminated event each start end in a goroutine; a tool
//     operation (terminate) or the owning run's end call it directly. end
//     runs once, the first reason wins, and every other caller waits for
//     it to finish: disconnect (terminating the debuggee), kill the
//     adapter's process group, close the stream, wait for the reader.
//   - The enclosure's process handle has its own owner goroutine, and the
//     adapter's stderr is drained into a capped buffer (cmd.Stderr) that
//     explains a failed start.
type session struct {
	cfg     *Config
	adapter *Adapter
	metrics *metrics.Metrics
	driver  string // the enclosure's, for metrics
	// enc is the run's enclosure, asked when the adapter's stream ends
	// unexpectedly; nil in unit tests that build a session alone.
	enc      enclosure.Enclosure
	paths    paths
	program  string // as the model gave it
	attached bool
	started  time.Time

	proc      enclosure.Process // nil for attach
	conn      net.Conn          // nil for stdio
	stderr    *capped
	c         *client
	caps      dap.Capabilities
	stdout    *capped // the debuggee's, from output events
	stderrOut *capped
	console   *capped // the adapter's own messages (console, important)
	ttl       *time.Timer
	// removeAfter is a host file the adapter built (delve's binary),
	// removed when the session ends, whether or not the adapter did.
	removeAfter string

	mu         sync.Mutex
	stop       *stopState // nil while running
	exitCode   *int
	terminated bool
	bps        map[string][]breakpoint // by absolute (enclosure) path
	// heldBack are the stored breakpoints the handshake did not send, the
	// files not in the adapter's languages, by host path.
	heldBack map[string][]int
	live     bool // the start succeeded and was counted

	endOnce sync.Once
	ended   chan struct{}
	reason  string // why it ended, for status
	detail  string
	// onEnd is called once, from end, after everything is stopped.
	onEnd func(*session)
}

// breakpoint is the adapter's answer for one requested line; the adapter
// may move it to the nearest line with code.
type breakpoint struct {
	requested int
	dap.Breakpoint
}

// stopState is where the program stopped, filled lazily: the event gives
// the thread and reason, the caller fetches the top frame.
type stopState struct {
	threadID    int
	reason      string
	description string
	frame       *dap.StackFrame // nil until fetched
	// shownFrames and shownRefs are the frame ids and variables
	// references given to the model during this stop: the ones it may
	// pass back. Under session.mu.
	shownFrames map[int]bool
	shownRefs   map[int]bool
}

// newSession builds a session; startAdapter (launch) or connect (attach)
// then opens its stream.
func newSession(cfg *Config, a *Adapter, m *metrics.Metrics, p paths, program string) *session {
	return &session{
		cfg: cfg, adapter: a, metrics: m, paths: p, program: program, started: time.Now(),
		stderr: newCapped(16 << 10), stdout: newCapped(cfg.OutputLimit), stderrOut: newCapped(cfg.OutputLimit),
		console: newCapped(16 << 10),
		bps:     map[string][]breakpoint{}, ended: make(chan struct{}),
	}
}

// connect starts the DAP client on the stream, the TTL timer and the
// watcher that ends the session when the stream does.
func (s *session) connect(r io.Reader, w io.Writer) {
	s.c = newClient(r, w, s.onEvent)
	s.ttl = time.AfterFunc(s.cfg.SessionTTL, func() {
		s.end(metrics.ReasonTTL, fmt.Sprintf("its time to live (%s) passed", s.cfg.SessionTTL))
	})
	go func() {
		select {
		case <-s.c.Done():
			s.mu.Lock()
			finished := s.terminated || s.exitCode != nil
			s.mu.Unlock()
			if finished {
				go s.end(metrics.ReasonStopped, "the program ended")
			} else {
				go s.end(metrics.ReasonCrashed, s.adapterStopped())
			}
		case <-s.ended:
		}
	}()
}

// adapterStopped says why the adapter's stream ended before the program
// did: when its container stopped, went away, is paused, or its engine
// does not answer, that (naming the container and what to do), not only
// "the adapter closed its connection" (issue 24 item 11).
func (s *session) adapterStopped() string {
	why := "the adapter stopped: " + errString(s.c.Err())
	if s.enc == nil || s.driver == "host" {
		return why // the host does not stop under its processes
	}
	if s.proc != nil {
		// A container's handle learns why its process ended (its
		// container stopped) once the engine says so.
		t := time.NewTimer(adapterExitWait)
		select {
		case <-s.proc.Done():
			if _, err := s.proc.Wait(); enclosure.Down(err) {
				t.Stop()
				return "the adapter stopped with its container: " + enclosure.Say(err)
			}
		case <-t.C:
		}
	}
	if err := enclosure.Check(context.Background(), s.enc); err != nil {
		return "the adapter stopped with its container: " + enclosure.Say(err)
	}
	return why
}

// adapterExitWait bounds the wait for an adapter's process to be known
// ended once its stream ended.
const adapterExitWait = 3 * time.Second

// onEvent keeps the session's state; it runs on the reader goroutine.
func (s *session) onEvent(e dap.EventMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ev := e.(type) {
	case *dap.StoppedEvent:
		s.stop = &stopState{threadID: ev.Body.ThreadId, reason: ev.Body.Reason, description: joinDistinct(ev.Body.Text, ev.Body.Description),
			shownFrames: map[int]bool{}, shownRefs: map[int]bool{}}
	case *dap.ContinuedEvent:
		s.stop = nil
	case *dap.OutputEvent:
		// Kept apart: the adapters read the two pipes separately, so
		// interleaving them splits lines.
		switch ev.Body.Category {
		case "stdout":
			_, _ = s.stdout.Write([]byte(ev.Body.Output))
		case "stderr":
			_, _ = s.stderrOut.Write([]byte(ev.Body.Output))
		case "console", "important":
			_, _ = s.console.Write([]byte(ev.Body.Output))
		}
	case *dap.ExitedEvent:
		code := ev.Body.ExitCode
		s.exitCode = &code
		s.stop = nil
	case *dap.TerminatedEvent:
		s.terminated = true
		s.stop = nil
		go s.end(metrics.ReasonStopped, "the program ended")
	case *dap.BreakpointEvent:
		s.updateBreakpoint(ev.Body.Reason, ev.Body.Breakpoint)
	}
}

// updateBreakpoint applies a breakpoint event to the stored results, by
// breakpoint id. Called with mu held.
func (s *session) updateBreakpoint(reason string, bp dap.Breakpoint) {
	if bp.Id == 0 {
		return
	}
	for file, list := range s.bps {
		for i, old := range list {
			if old.Id != bp.Id {
				continue
			}
			if reason == "removed" {
				s.bps[file] = append(list[:i], list[i+1:]...)
				return
			}
			if bp.Line == 0 {
				bp.Line = old.Line
			}
			if bp.Source == nil {
				bp.Source = old.Source
			}
			list[i].Breakpoint = bp
			return
		}
	}
}

// alive says whether the session has not ended.
func (s *session) alive() bool {
	select {
	case <-s.ended:
		return false
	default:
		return true
	}
}

// endedWhy is the reason and detail of the end, once ended.
func (s *session) endedWhy() (string, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason, s.detail
}

// end ends the session once: a polite disconnect that terminates a
// launched debuggee, then the adapter's process group killed and the
// stream closed. Later callers wait for the first to finish.
func (s *session) end(reason, detail string) {
	s.endOnce.Do(func() {
		s.mu.Lock()
		s.reason, s.detail = reason, detail
		s.mu.Unlock()
		if s.ttl != nil {
			s.ttl.Stop()
		}
		disconnect := func() {
			if s.c == nil {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_, _ = s.c.call(ctx, &dap.DisconnectRequest{
				Request:   dap.Request{Command: "disconnect"},
				Arguments: &dap.DisconnectArguments{TerminateDebuggee: !s.attached},
			})
			cancel()
		}
		if s.proc != nil {
			// No grace after the answer: an adapter exits only when its
			// stream closes, so waiting would only delay the end.
			enclosure.StopFunc(s.proc, disconnect, 0)
		} else {
			disconnect()
		}
		if s.conn != nil {
			_ = s.conn.Close()
		}
		// The adapter's end (or the closed connection) ends the reader;
		// the wait is bounded all the same, so a stream something else
		// holds open never hangs the caller.
		if s.c != nil {
			select {
			case <-s.c.Done():
			case <-time.After(5 * time.Second):
			}
		}
		if s.removeAfter != "" {
			_ = os.Remove(s.removeAfter)
		}
		s.mu.Lock()
		live := s.live
		s.mu.Unlock()
		if live {
			s.metrics.SessionEnded(metrics.KindDebug, s.driver, reason)
		} else {
			s.metrics.SessionFailed(metrics.KindDebug)
		}
		if s.onEnd != nil {
			s.onEnd(s)
		}
		close(s.ended)
	})
	<-s.ended
}

// markLive counts the session as started, once the handshake succeeded.
func (s *session) markLive() {
	s.mu.Lock()
	s.live = true
	s.mu.Unlock()
	s.metrics.SessionStarted(metrics.KindDebug, s.driver)
}

// joinDistinct joins the stop's text and description (an exception's
// type and message), dropping empty and repeated parts.
func joinDistinct(a, b string) string {
	switch {
	case a == "" || a == b:
		return b
	case b == "":
		return a
	}
	return a + ": " + b
}

func errString(err error) string {
	if err == nil {
		return "no reason given"
	}
	return err.Error()
}
