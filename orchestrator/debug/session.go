package debug

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/go-dap"

	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

// session is one debug session, composed of its jobs: the adapter's
// process and its DAP client (link), what the adapter's events have said
// about the program (state), the paths across the enclosure's boundary
// (paths) and the adapter's catalog entry, which also holds its quirks
// (adapter). Its own methods run the session: the handshake, the
// operations on a stopped program, and its end.
//
// Goroutines, after delve's service/dap/server.go:
//
//   - The reader (client.read) is the only reader of the adapter's stream.
//     It applies each event to the program's state (onEvent, under the
//     state's lock), then hands it to the waiters registered for it, and
//     routes each response to its request by request_seq. It never sends a
//     request and never waits on a caller; when the stream ends or breaks
//     it closes the client's done channel, which ends every pending wait.
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
//     adapter's process group, close the stream, wait for the reader
//     (adapterLink.close).
type session struct {
	cfg      *Config
	adapter  *Adapter // its catalog entry and quirks
	metrics  *metrics.Metrics
	paths    paths
	program  string // as the model gave it
	attached bool
	started  time.Time
	link     adapterLink
	caps     dap.Capabilities
	state    *programState
	ttl      *time.Timer

	endOnce sync.Once
	ended   chan struct{}
	// onEnd is called once, from end, after everything is stopped.
	onEnd func(*session)

	// keep writes the session's record in the state directory, for a
	// Berth that comes back; nil when it is not kept (see keep.go).
	keep atomic.Pointer[keeper]

	mu     sync.Mutex // guards what follows
	live   bool       // the start succeeded and was counted
	reason string     // why it ended, for status
	detail string
}

// newSession builds a session; start (launch) or attach then opens its
// stream.
func newSession(cfg *Config, a *Adapter, m *metrics.Metrics, p paths, program string) *session {
	return &session{
		cfg: cfg, adapter: a, metrics: m, paths: p, program: program, started: time.Now(),
		link: adapterLink{wait: cfg.RequestWait, stderr: newCapped(16 << 10)}, state: newProgramState(cfg.OutputLimit), ended: make(chan struct{}),
	}
}

// start starts the adapter (its executable exe, in dir) in the run's
// enclosure, connects to it and starts the session's clock.
func (s *session) start(ctx context.Context, exe, dir string) error {
	if err := s.link.start(ctx, s.adapter, exe, dir, s.onEvent); err != nil {
		return err
	}
	s.supervise(s.cfg.SessionTTL)
	return nil
}

// attach connects to an adapter already listening (conn) and starts the
// session's clock.
func (s *session) attach(conn net.Conn) {
	s.attached = true
	s.link.attach(conn, s.onEvent)
	s.supervise(s.cfg.SessionTTL)
}

// supervise starts the TTL timer, ending the session after left (its
// time to live, less what passed before Berth restarted), and the
// watcher that ends the session when the adapter's stream does.
func (s *session) supervise(left time.Duration) {
	s.ttl = time.AfterFunc(left, func() {
		s.end(metrics.ReasonTTL, fmt.Sprintf("its time to live (%s) passed", s.cfg.SessionTTL))
	})
	go func() {
		select {
		case <-s.link.c.Done():
			if terminated, code := s.state.ended(); terminated || code != nil {
				go s.end(metrics.ReasonStopped, "the program ended")
			} else {
				go s.end(metrics.ReasonCrashed, s.link.stopped())
			}
		case <-s.ended:
		}
	}()
}

// onEvent keeps the program's state; it runs on the reader goroutine.
func (s *session) onEvent(e dap.EventMessage) {
	switch e.(type) {
	case *dap.StoppedEvent, *dap.ContinuedEvent, *dap.ExitedEvent:
		defer s.keepLater()
	}
	if s.state.apply(e) {
		go s.end(metrics.ReasonStopped, "the program ended")
	}
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
		s.link.close(!s.attached)
		s.mu.Lock()
		live := s.live
		s.mu.Unlock()
		if live {
			s.metrics.SessionEnded(metrics.KindDebug, s.link.driver, reason)
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

// markLive counts the session as started, once the handshake succeeded.
func (s *session) markLive() {
	s.mu.Lock()
	s.live = true
	s.mu.Unlock()
	s.metrics.SessionStarted(metrics.KindDebug, s.link.driver)
}

// handshake runs initialize → launch/attach (its response not awaited) →
// initialized → setBreakpoints for every stored file in the adapter's
// languages (the others are kept in heldBack) and the exception
// breakpoints → configurationDone → the launch/attach response, in
// whichever order the adapter sends it. wait bounds the steps the program
// start may hold up (a build, for delve).
func (s *session) handshake(ctx context.Context, command string, args map[string]any, bps map[string][]int, wait time.Duration) error {
	resp, err := s.link.request(ctx, &dap.InitializeRequest{
		Request: dap.Request{Command: "initialize"},
		Arguments: dap.InitializeRequestArguments{
			ClientID: "berth", ClientName: "Berth", AdapterID: s.adapter.AdapterID,
			LinesStartAt1: true, ColumnsStartAt1: true, PathFormat: "path", SupportsVariableType: true,
		},
	})
	if err != nil {
		return err
	}
	if ir, ok := resp.(*dap.InitializeResponse); ok {
		s.caps = ir.Body
	}

	raw, err := json.Marshal(args)
	if err != nil {
		return err
	}
	initialized := s.link.c.watch("initialized")
	var started <-chan dap.Message
	if command == "attach" {
		started, err = s.link.c.send(&dap.AttachRequest{Request: dap.Request{Command: "attach"}, Arguments: raw})
	} else {
		started, err = s.link.c.send(&dap.LaunchRequest{Request: dap.Request{Command: "launch"}, Arguments: raw})
	}
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var startResp dap.Message
	for done := false; !done; {
		select {
		case <-initialized.ch:
			done = true
		case m := <-started:
			if err := responseError(command, m); err != nil {
				s.link.c.unwatch(initialized)
				return err
			}
			startResp, started = m, nil
		case <-s.link.c.Done():
			return fmt.Errorf("%w: %v", ErrEnded, s.link.c.Err())
		case <-wctx.Done():
			s.link.c.unwatch(initialized)
			return fmt.Errorf("%s: no initialized event within %s: %w", command, wait, ErrTimeout)
		}
	}

	if err := s.sendBreakpoints(ctx, bps); err != nil {
		return err
	}
	if filters := s.adapter.exceptionFilters(s.caps); filters != nil {
		_, err := s.link.request(ctx, &dap.SetExceptionBreakpointsRequest{
			Request: dap.Request{Command: "setExceptionBreakpoints"}, Arguments: dap.SetExceptionBreakpointsArguments{Filters: filters},
		})
		if err != nil {
			return err
		}
	}
	if s.caps.SupportsConfigurationDoneRequest {
		_, err := s.link.request(ctx, &dap.ConfigurationDoneRequest{Request: dap.Request{Command: "configurationDone"}})
		if err != nil {
			return err
		}
	}
	if startResp == nil {
		if _, err := s.link.c.await(wctx, command, started); err != nil {
			return err
		}
	}
	return nil
}

// setBreakpoints replaces the breakpoints of one file (an absolute host
// path, symlinks resolved) and keeps the adapter's answer.
func (s *session) setBreakpoints(ctx context.Context, hostFile string, lines []int) error {
	file, err := s.paths.adapter(hostFile)
	if err != nil {
		return err
	}
	sbs := make([]dap.SourceBreakpoint, len(lines))
	for i, l := range lines {
		sbs[i] = dap.SourceBreakpoint{Line: l}
	}
	req := &setBreakpointsRequest{Request: dap.Request{Command: "setBreakpoints"}}
	req.Arguments.Source = dap.Source{Path: file, Name: baseName(file)}
	req.Arguments.Breakpoints, req.Arguments.Lines = sbs, lines
	if lines == nil {
		req.Arguments.Lines = []int{}
	}
	resp, err := s.link.request(ctx, req)
	if err != nil {
		return err
	}
	sb, err := as[*dap.SetBreakpointsResponse]("setBreakpoints", resp)
	if err != nil {
		return err
	}
	got := sb.Body.Breakpoints
	out := make([]breakpoint, len(lines))
	for i, l := range lines {
		bp := dap.Breakpoint{Line: l, Message: "the adapter did not answer for this line"}
		if i < len(got) {
			bp = got[i]
			if bp.Line == 0 {
				bp.Line = l
			}
		}
		bp.Source = &dap.Source{Path: file}
		out[i] = breakpoint{requested: l, Breakpoint: bp}
	}
	s.state.setBreakpoints(file, out)
	return nil
}

// setBreakpointsRequest is go-dap's request without omitempty on the
// lists: clearing a file sends "breakpoints": [], which debugpy needs
// (without the field its server disconnects).
type setBreakpointsRequest struct {
	dap.Request
	Arguments struct {
		Source      dap.Source             `json:"source"`
		Breakpoints []dap.SourceBreakpoint `json:"breakpoints"`
		Lines       []int                  `json:"lines"`
	} `json:"arguments"`
}

// stillRunning is the answer when the program did not stop in time.
const stillRunning = "still running: call pause or status"

// errRunning refuses an operation that needs a stopped program.
var errRunning = errors.New("the program is running, not stopped: call pause first (or status to see what it is doing)")

// stopEvents are the events that end a wait for the program to stop.
var stopEvents = []string{"stopped", "terminated", "exited"}

// waitStop waits up to wait for w's event and says where the program is:
// stopped (with the location), ended (with its exit code), or still
// running.
func (s *session) waitStop(ctx context.Context, w *waiter, wait time.Duration) string {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	e, err := s.link.c.wait(wctx, w)
	switch {
	case err == nil:
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return fmt.Sprintf("%s (it did not stop within %s)", stillRunning, wait)
	case errors.Is(err, ErrEnded):
		<-s.ended
		return s.endText()
	default:
		return fmt.Sprintf("%s (the wait was cut short: %v)", stillRunning, err)
	}
	if _, ok := e.(*dap.StoppedEvent); ok {
		return s.describeStop(ctx)
	}
	// exited comes before terminated; give the adapter a moment to finish
	// (late output), then end the session.
	if _, ok := e.(*dap.ExitedEvent); ok {
		t := s.link.c.watch("terminated")
		done, _ := s.state.ended()
		if done {
			s.link.c.unwatch(t)
		} else {
			tctx, cancel := context.WithTimeout(ctx, time.Second)
			_, _ = s.link.c.wait(tctx, t)
			cancel()
		}
	}
	s.end(metrics.ReasonStopped, "the program ended")
	return s.endText()
}

// endText says how the session ended, with the program's exit code.
func (s *session) endText() string {
	_, detail := s.endedWhy()
	_, code := s.state.ended()
	text := "the session ended: " + detail
	if code != nil {
		text += fmt.Sprintf(" (exit code %d)", *code)
	}
	if stderr := strings.TrimSpace(s.paths.shown(s.link.stderr.String())); stderr != "" && detail != "the program ended" {
		text += "\nadapter said: " + cutValue(lastLines(stderr, 5))
	}
	return text + "\ncall output for what the program printed"
}

// describeStop says where the program stopped, fetching the top frame
// once per stop.
func (s *session) describeStop(ctx context.Context) string {
	st := s.state.current()
	if st == nil {
		return "running"
	}
	if st.frame == nil {
		tid := st.threadID
		if tid == 0 {
			if ts, err := s.link.threadList(ctx); err == nil && len(ts) > 0 {
				tid = ts[0].Id
			}
		}
		frames, _, err := s.link.frames(ctx, tid, 1)
		if err != nil {
			frames = nil
		}
		s.state.fetched(st, tid, frames)
	}
	text := fmt.Sprintf("stopped (%s) in thread %d", cutValue(st.reason), st.threadID)
	if st.description != "" && st.description != st.reason {
		text += ": " + cutValue(s.paths.relative(st.description))
	}
	if st.frame != nil {
		text += " at " + s.paths.location(sourcePath(st.frame.Source), st.frame.Line, st.frame.Name, fmt.Sprintf(" (frame_id %d)", st.frame.Id))
	}
	return text
}

// resume sends continue, next, stepIn or stepOut and waits for the stop.
func (s *session) resume(ctx context.Context, command string, threadID int) (string, error) {
	st, err := s.state.stopped()
	if err != nil {
		if command == "continue" {
			return "", errors.New("the program is already running: call pause to stop it, or status")
		}
		return "", err
	}
	if threadID == 0 {
		threadID = st.threadID
	}
	var req dap.RequestMessage
	switch command {
	case "continue":
		req = &dap.ContinueRequest{Request: dap.Request{Command: command}, Arguments: dap.ContinueArguments{ThreadId: threadID}}
	case "next":
		req = &dap.NextRequest{Request: dap.Request{Command: command}, Arguments: dap.NextArguments{ThreadId: threadID}}
	case "stepIn":
		req = &dap.StepInRequest{Request: dap.Request{Command: command}, Arguments: dap.StepInArguments{ThreadId: threadID}}
	case "stepOut":
		req = &dap.StepOutRequest{Request: dap.Request{Command: command}, Arguments: dap.StepOutArguments{ThreadId: threadID}}
	}
	w := s.link.c.watch(stopEvents...)
	if _, err := s.link.request(ctx, req); err != nil {
		s.link.c.unwatch(w)
		return "", err
	}
	s.state.resumed(st)
	// The adapter sends no event for a continue it was asked for: the
	// record says now that the program runs, so that a Berth killed
	// during the wait for its stop does not show the old stop again.
	s.keepNow(nil)
	return s.waitStop(ctx, w, s.cfg.StopWait), nil
}

// pause stops a running program.
func (s *session) pause(ctx context.Context, threadID int) (string, error) {
	if _, err := s.state.stopped(); err == nil {
		return "already " + s.describeStop(ctx), nil
	}
	if threadID == 0 {
		ts, err := s.link.threadList(ctx)
		if err != nil {
			return "", err
		}
		if len(ts) == 0 {
			return "", errors.New("the program has no threads to pause")
		}
		threadID = ts[0].Id
	}
	w := s.link.c.watch(stopEvents...)
	if _, err := s.link.request(ctx, &dap.PauseRequest{Request: dap.Request{Command: "pause"}, Arguments: dap.PauseArguments{ThreadId: threadID}}); err != nil {
		s.link.c.unwatch(w)
		return "", err
	}
	return s.waitStop(ctx, w, s.cfg.StopWait), nil
}

func (s *session) threads(ctx context.Context) (string, error) {
	ts, err := s.link.threadList(ctx)
	if err != nil {
		return "", err
	}
	if len(ts) == 0 {
		return "no threads", nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s:\n", text.Count(len(ts), "thread"))
	for _, t := range ts {
		fmt.Fprintf(&b, "thread_id %d: %s\n", t.Id, text.Line(t.Name))
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

// stack lists up to 30 frames of the thread (default: the stopped one).
func (s *session) stack(ctx context.Context, threadID int) (string, error) {
	st, err := s.state.stopped()
	if err != nil {
		return "", err
	}
	if threadID == 0 {
		threadID = st.threadID
	}
	frames, total, err := s.link.frames(ctx, threadID, maxFrames)
	if err != nil {
		return "", err
	}
	if len(frames) > maxFrames {
		frames = frames[:maxFrames]
	}
	s.state.noteFrames(st, frames)
	var b strings.Builder
	fmt.Fprintf(&b, "thread %d, %s", threadID, text.Count(len(frames), "frame"))
	if total > len(frames) {
		fmt.Fprintf(&b, " (showing %d of %d)", len(frames), total)
	}
	b.WriteString(":\n")
	for i, f := range frames {
		fmt.Fprintf(&b, "#%d frame_id %d: %s\n", i, f.Id, s.paths.location(sourcePath(f.Source), f.Line, f.Name, ""))
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

// scopes lists a frame's scopes with their references.
func (s *session) scopes(ctx context.Context, frameID int) (string, error) {
	st, err := s.state.stopped()
	if err != nil {
		return "", err
	}
	if err := s.checkFrame(ctx, st, frameID); err != nil {
		return "", err
	}
	resp, err := exchange[*dap.ScopesResponse](ctx, &s.link, &dap.ScopesRequest{Request: dap.Request{Command: "scopes"}, Arguments: dap.ScopesArguments{FrameId: frameID}})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "scopes of frame %d (pass a reference to variables):\n", frameID)
	for _, sc := range resp.Body.Scopes {
		s.state.noteRef(st, sc.VariablesReference)
		fmt.Fprintf(&b, "%s: reference %d", text.Line(sc.Name), sc.VariablesReference)
		if n := sc.NamedVariables + sc.IndexedVariables; n > 0 {
			fmt.Fprintf(&b, " (%d variables)", n)
		}
		if sc.Expensive {
			b.WriteString(" (expensive)")
		}
		b.WriteString("\n")
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

// variables lists up to 50 children of a reference, values cut at 400
// characters.
func (s *session) variables(ctx context.Context, ref int) (string, error) {
	st, err := s.state.stopped()
	if err != nil {
		return "", err
	}
	if err := s.state.checkRef(st, ref); err != nil {
		return "", err
	}
	resp, err := exchange[*dap.VariablesResponse](ctx, &s.link, &dap.VariablesRequest{Request: dap.Request{Command: "variables"}, Arguments: dap.VariablesArguments{VariablesReference: ref}})
	if err != nil {
		return "", err
	}
	vars := resp.Body.Variables
	var b strings.Builder
	shown := vars
	if len(shown) > maxChildren {
		shown = shown[:maxChildren]
	}
	fmt.Fprintf(&b, "reference %d: %s", ref, text.Count(len(vars), "child"))
	if len(vars) > len(shown) {
		fmt.Fprintf(&b, " (showing %d of %d)", len(shown), len(vars))
	}
	b.WriteString(":\n")
	for _, v := range shown {
		b.WriteString(text.Line(v.Name))
		if v.Type != "" {
			fmt.Fprintf(&b, " (%s)", text.Line(v.Type))
		}
		b.WriteString(" = " + cutValue(v.Value))
		s.state.noteRef(st, v.VariablesReference)
		if v.VariablesReference > 0 {
			fmt.Fprintf(&b, " [reference %d]", v.VariablesReference)
		}
		b.WriteString("\n")
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

// evaluate evaluates an expression in a frame (default: the stopped
// frame), in that frame's own scope.
func (s *session) evaluate(ctx context.Context, expr string, frameID int) (string, error) {
	st, err := s.state.stopped()
	if err != nil {
		return "", err
	}
	if frameID != 0 {
		if err := s.checkFrame(ctx, st, frameID); err != nil {
			return "", err
		}
	} else {
		s.describeStop(ctx)
		if id := s.state.topFrame(); id != 0 {
			frameID = id
		}
	}
	evalCtx := s.adapter.evaluateContext()
	resp, err := exchange[*dap.EvaluateResponse](ctx, &s.link, &dap.EvaluateRequest{Request: dap.Request{Command: "evaluate"},
		Arguments: dap.EvaluateArguments{Expression: expr, FrameId: frameID, Context: evalCtx}})
	if err != nil {
		return "", err
	}
	body := resp.Body
	s.state.noteRef(st, body.VariablesReference)
	text := cutValue(body.Result)
	if body.Type != "" {
		text += " (" + cutValue(body.Type) + ")"
	}
	if body.VariablesReference > 0 {
		text += fmt.Sprintf(" [reference %d]", body.VariablesReference)
	}
	return text, nil
}

// checkFrame refuses a frame id that is not in the current stack, before
// the adapter sees it: adapters answer a wrong id badly (debugpy's
// adapter loses its server, lldb-dap answers for some other frame). A
// frame not shown during this stop is looked for in the stopped thread's
// stack.
func (s *session) checkFrame(ctx context.Context, st *stopState, id int) error {
	known, tid := s.state.shownFrame(st, id)
	if known {
		return nil
	}
	frames, _, err := s.link.frames(ctx, tid, maxFrames)
	if err != nil {
		return err
	}
	s.state.noteFrames(st, frames)
	for _, f := range frames {
		if f.Id == id {
			return nil
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "frame %d is not in the current stack; frames are (thread %d):", id, tid)
	const listed = 10
	for i, f := range frames {
		if i == listed {
			fmt.Fprintf(&b, "\n… and %d more: call stack", len(frames)-listed)
			break
		}
		where := f.Name
		if path := sourcePath(f.Source); path != "" {
			where = fmt.Sprintf("%s:%d in %s", s.paths.show(path), f.Line, text.Line(f.Name))
		}
		fmt.Fprintf(&b, "\n#%d frame_id %d: %s", i, f.Id, where)
	}
	if len(frames) == 0 {
		b.WriteString(" none")
	}
	b.WriteString("\npass one of these frame_ids (frame ids last only while the program stays stopped where it is)")
	return errors.New(b.String())
}

// breakpointText reports one file's breakpoints as the adapter answered.
func (s *session) breakpointText(file string) string {
	mapped, err := s.paths.adapter(file)
	if err != nil {
		return err.Error()
	}
	return s.state.breakpointText(s.paths, mapped)
}

// Bounds on what adapterSaid shows.
const (
	saidLines = 20
	saidChars = 2000
)

// adapterSaid is the tail of what the adapter said, for a failed launch
// or attach: its console and stderr output events (delve puts a build's
// errors there and answers only "check the debug console", which the
// model does not have) and its process's own stderr.
func (s *session) adapterSaid() string {
	var parts []string
	for _, c := range []*capped{s.state.console, s.state.stderrOut, s.link.stderr} {
		if t := strings.TrimSpace(s.paths.shown(c.String())); t != "" {
			parts = append(parts, t)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	said := lastLines(strings.Join(parts, "\n"), saidLines)
	if n := len(said); n > saidChars {
		cut := n - saidChars
		for cut < n && !utf8.RuneStart(said[cut]) {
			cut++
		}
		said = "…" + said[cut:]
	}
	return "\nthe adapter's last output:\n" + said
}

// debugConsole is the pointer to a console the model does not have, in
// the adapter's refusal; the adapter's output is shown in its place.
const debugConsole = "Check the debug console for details."

// failed words a failed launch or attach: the adapter's error and, when
// it said anything, its output instead of a pointer to its console.
func (s *session) failed(what string, err error) error {
	said := s.adapterSaid()
	msg := text.Indent(s.paths.relative(err.Error()), "  ") // the adapter's words
	if said != "" {
		msg = strings.TrimRight(strings.Replace(msg, debugConsole, "", 1), ": ")
	}
	return fmt.Errorf("%s failed: %s%s", what, msg, said)
}

// sendBreakpoints sends the adapter the stored breakpoints bps, file by
// file in order; those in files of another language are held back
// (state.holdBack) rather than sent.
func (s *session) sendBreakpoints(ctx context.Context, bps map[string][]int) error {
	held := map[string][]int{}
	for _, f := range slices.Sorted(maps.Keys(bps)) {
		if !s.adapter.takes(f) {
			// Another language's file: debugpy would call a C line
			// verified, lldb list a Python one as unverified, delve
			// fail to find a file its build never saw.
			held[f] = bps[f]
			continue
		}
		if err := s.setBreakpoints(ctx, f, bps[f]); err != nil {
			return err
		}
	}
	s.state.holdBack(held)
	return nil
}
