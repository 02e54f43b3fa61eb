package debug

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/go-dap"

	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

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
	e, err := s.c.wait(wctx, w)
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
		t := s.c.watch("terminated")
		s.mu.Lock()
		done := s.terminated
		s.mu.Unlock()
		if done {
			s.c.unwatch(t)
		} else {
			tctx, cancel := context.WithTimeout(ctx, time.Second)
			_, _ = s.c.wait(tctx, t)
			cancel()
		}
	}
	s.end(metrics.ReasonStopped, "the program ended")
	return s.endText()
}

// endText says how the session ended, with the program's exit code.
func (s *session) endText() string {
	_, detail := s.endedWhy()
	s.mu.Lock()
	code := s.exitCode
	s.mu.Unlock()
	text := "the session ended: " + detail
	if code != nil {
		text += fmt.Sprintf(" (exit code %d)", *code)
	}
	if stderr := strings.TrimSpace(s.shown(s.stderr.String())); stderr != "" && detail != "the program ended" {
		text += "\nadapter said: " + cutValue(lastLines(stderr, 5))
	}
	return text + "\ncall output for what the program printed"
}

// describeStop says where the program stopped, fetching the top frame
// once per stop.
func (s *session) describeStop(ctx context.Context) string {
	s.mu.Lock()
	st := s.stop
	s.mu.Unlock()
	if st == nil {
		return "running"
	}
	if st.frame == nil {
		tid := st.threadID
		if tid == 0 {
			if ts, err := s.threadList(ctx); err == nil && len(ts) > 0 {
				tid = ts[0].Id
			}
		}
		frames, _, err := s.frames(ctx, tid, 1)
		s.mu.Lock()
		if st.threadID == 0 {
			st.threadID = tid
		}
		if err == nil && len(frames) > 0 {
			st.frame = &frames[0]
			st.shownFrames[frames[0].Id] = true
		}
		s.mu.Unlock()
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

// stopped returns the current stop, or errRunning.
func (s *session) stopped() (*stopState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop == nil {
		return nil, errRunning
	}
	return s.stop, nil
}

// resume sends continue, next, stepIn or stepOut and waits for the stop.
func (s *session) resume(ctx context.Context, command string, threadID int) (string, error) {
	st, err := s.stopped()
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
	w := s.c.watch(stopEvents...)
	if _, err := s.request(ctx, req); err != nil {
		s.c.unwatch(w)
		return "", err
	}
	s.mu.Lock()
	if s.stop == st {
		s.stop = nil
	}
	s.mu.Unlock()
	return s.waitStop(ctx, w, s.cfg.StopWait), nil
}

// pause stops a running program.
func (s *session) pause(ctx context.Context, threadID int) (string, error) {
	if _, err := s.stopped(); err == nil {
		return "already " + s.describeStop(ctx), nil
	}
	if threadID == 0 {
		ts, err := s.threadList(ctx)
		if err != nil {
			return "", err
		}
		if len(ts) == 0 {
			return "", errors.New("the program has no threads to pause")
		}
		threadID = ts[0].Id
	}
	w := s.c.watch(stopEvents...)
	if _, err := s.request(ctx, &dap.PauseRequest{Request: dap.Request{Command: "pause"}, Arguments: dap.PauseArguments{ThreadId: threadID}}); err != nil {
		s.c.unwatch(w)
		return "", err
	}
	return s.waitStop(ctx, w, s.cfg.StopWait), nil
}

// request sends one request and waits up to RequestWait for its answer.
func (s *session) request(ctx context.Context, req dap.RequestMessage) (dap.Message, error) {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestWait)
	defer cancel()
	return s.c.call(rctx, req)
}

// exchange is request with the answer typed as T, the response its
// command has.
func exchange[T dap.ResponseMessage](ctx context.Context, s *session, req dap.RequestMessage) (T, error) {
	resp, err := s.request(ctx, req)
	if err != nil {
		var zero T
		return zero, err
	}
	return as[T](req.GetRequest().Command, resp)
}

// as is a response as the type its request's command answers with. go-dap
// types a response by the command the adapter wrote in it, so an adapter
// that answers under another command gets an error here, not a panic.
func as[T dap.ResponseMessage](command string, m dap.Message) (T, error) {
	r, ok := m.(T)
	if !ok {
		return r, fmt.Errorf("the adapter answered %s with an unexpected message (%T): call status, or terminate and launch again", command, m)
	}
	return r, nil
}

func (s *session) threadList(ctx context.Context) ([]dap.Thread, error) {
	resp, err := exchange[*dap.ThreadsResponse](ctx, s, &dap.ThreadsRequest{Request: dap.Request{Command: "threads"}})
	if err != nil {
		return nil, err
	}
	return resp.Body.Threads, nil
}

func (s *session) threads(ctx context.Context) (string, error) {
	ts, err := s.threadList(ctx)
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

func (s *session) frames(ctx context.Context, threadID, levels int) ([]dap.StackFrame, int, error) {
	resp, err := exchange[*dap.StackTraceResponse](ctx, s, &dap.StackTraceRequest{Request: dap.Request{Command: "stackTrace"},
		Arguments: dap.StackTraceArguments{ThreadId: threadID, Levels: levels}})
	if err != nil {
		return nil, 0, err
	}
	body := resp.Body
	return body.StackFrames, body.TotalFrames, nil
}

// stack lists up to 30 frames of the thread (default: the stopped one).
func (s *session) stack(ctx context.Context, threadID int) (string, error) {
	st, err := s.stopped()
	if err != nil {
		return "", err
	}
	if threadID == 0 {
		threadID = st.threadID
	}
	frames, total, err := s.frames(ctx, threadID, maxFrames)
	if err != nil {
		return "", err
	}
	if len(frames) > maxFrames {
		frames = frames[:maxFrames]
	}
	s.noteFrames(st, frames)
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
	st, err := s.stopped()
	if err != nil {
		return "", err
	}
	if err := s.checkFrame(ctx, st, frameID); err != nil {
		return "", err
	}
	resp, err := exchange[*dap.ScopesResponse](ctx, s, &dap.ScopesRequest{Request: dap.Request{Command: "scopes"}, Arguments: dap.ScopesArguments{FrameId: frameID}})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "scopes of frame %d (pass a reference to variables):\n", frameID)
	for _, sc := range resp.Body.Scopes {
		s.noteRef(st, sc.VariablesReference)
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
	st, err := s.stopped()
	if err != nil {
		return "", err
	}
	if err := s.checkRef(st, ref); err != nil {
		return "", err
	}
	resp, err := exchange[*dap.VariablesResponse](ctx, s, &dap.VariablesRequest{Request: dap.Request{Command: "variables"}, Arguments: dap.VariablesArguments{VariablesReference: ref}})
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
		s.noteRef(st, v.VariablesReference)
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
	st, err := s.stopped()
	if err != nil {
		return "", err
	}
	if frameID != 0 {
		if err := s.checkFrame(ctx, st, frameID); err != nil {
			return "", err
		}
	} else {
		s.describeStop(ctx)
		s.mu.Lock()
		if s.stop != nil && s.stop.frame != nil {
			frameID = s.stop.frame.Id
		}
		s.mu.Unlock()
	}
	evalCtx := s.adapter.EvaluateContext
	if evalCtx == "" {
		evalCtx = "repl"
	}
	resp, err := exchange[*dap.EvaluateResponse](ctx, s, &dap.EvaluateRequest{Request: dap.Request{Command: "evaluate"},
		Arguments: dap.EvaluateArguments{Expression: expr, FrameId: frameID, Context: evalCtx}})
	if err != nil {
		return "", err
	}
	body := resp.Body
	s.noteRef(st, body.VariablesReference)
	text := cutValue(body.Result)
	if body.Type != "" {
		text += " (" + cutValue(body.Type) + ")"
	}
	if body.VariablesReference > 0 {
		text += fmt.Sprintf(" [reference %d]", body.VariablesReference)
	}
	return text, nil
}

// noteFrames records frames shown to the model during the stop st: the
// frame ids it may pass back.
func (s *session) noteFrames(st *stopState, frames []dap.StackFrame) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range frames {
		st.shownFrames[f.Id] = true
	}
}

// noteRef records a variables reference shown during the stop st.
func (s *session) noteRef(st *stopState, ref int) {
	if ref <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st.shownRefs[ref] = true
}

// checkFrame refuses a frame id that is not in the current stack, before
// the adapter sees it: adapters answer a wrong id badly (debugpy's
// adapter loses its server, lldb-dap answers for some other frame). A
// frame not shown during this stop is looked for in the stopped thread's
// stack.
func (s *session) checkFrame(ctx context.Context, st *stopState, id int) error {
	s.mu.Lock()
	known, tid := st.shownFrames[id], st.threadID
	s.mu.Unlock()
	if known {
		return nil
	}
	frames, _, err := s.frames(ctx, tid, maxFrames)
	if err != nil {
		return err
	}
	s.noteFrames(st, frames)
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

// checkRef refuses a variables reference not given out during the
// current stop: references last only until the program moves, and an
// adapter answers an old one with nothing (lldb-dap: "0 children") or
// with another variable's children.
func (s *session) checkRef(st *stopState, ref int) error {
	s.mu.Lock()
	known := st.shownRefs[ref]
	s.mu.Unlock()
	if known {
		return nil
	}
	return fmt.Errorf("reference %d is not valid where the program is stopped now: references last only until the program moves, and only those given by scopes, variables or evaluate since it stopped here count; call scopes with a frame_id from stack for fresh ones", ref)
}

// breakpointText reports one file's breakpoints as the adapter answered.
func (s *session) breakpointText(file string) string {
	mapped, err := s.mapPath(file)
	if err != nil {
		return err.Error()
	}
	return s.breakpointTextMapped(mapped)
}

// breakpointTextMapped is breakpointText for a path as the adapter sees it.
func (s *session) breakpointTextMapped(mapped string) string {
	s.mu.Lock()
	bps := append([]breakpoint(nil), s.bps[mapped]...)
	s.mu.Unlock()
	var b strings.Builder
	for _, bp := range bps {
		fmt.Fprintf(&b, "%s:%d ", s.paths.show(mapped), bp.requested)
		if bp.Line != bp.requested {
			fmt.Fprintf(&b, "(moved by the adapter to line %d, the nearest with code) ", bp.Line)
		}
		if bp.Verified {
			b.WriteString("verified")
		} else {
			b.WriteString("unverified")
			if bp.Message != "" {
				b.WriteString(": " + cutValue(s.paths.relative(bp.Message)))
			}
		}
		if src := s.paths.sourceLine(mapped, bp.Line); src != "" {
			fmt.Fprintf(&b, "\n  %d | %s", bp.Line, src)
		}
		b.WriteString("\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

func sorted(xs []string) []string {
	sort.Strings(xs)
	return xs
}

func sourcePath(src *dap.Source) string {
	if src == nil {
		return ""
	}
	return src.Path
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
