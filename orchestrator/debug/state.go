package debug

import (
	"fmt"
	"strings"
	"sync"

	"github.com/google/go-dap"
)

// programState is what the adapter has said about the program: where it
// stopped, how it ended, its breakpoints as the adapter answered them
// and what it printed. The reader goroutine applies the adapter's events
// to it (apply); a tool operation reads it and notes what it showed the
// model. Its lock guards all of it but the output, which the capped
// buffers guard.
type programState struct {
	stdout    *capped // the debuggee's, from output events
	stderrOut *capped
	console   *capped // the adapter's own messages (console, important)

	mu         sync.Mutex
	stop       *stopState // nil while running
	exitCode   *int
	terminated bool
	bps        map[string][]breakpoint // by absolute (enclosure) path
	// heldBack are the stored breakpoints the handshake did not send, the
	// files not in the adapter's languages, by host path.
	heldBack map[string][]int
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
	// pass back. Under programState.mu.
	shownFrames map[int]bool
	shownRefs   map[int]bool
}

func newProgramState(outputLimit int) *programState {
	return &programState{stdout: newCapped(outputLimit), stderrOut: newCapped(outputLimit), console: newCapped(16 << 10),
		bps: map[string][]breakpoint{}}
}

// apply keeps what an event says; it runs on the reader goroutine. It
// says whether the event ended the program (terminated).
func (st *programState) apply(e dap.EventMessage) (terminated bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	switch ev := e.(type) {
	case *dap.StoppedEvent:
		st.stop = &stopState{threadID: ev.Body.ThreadId, reason: ev.Body.Reason, description: joinDistinct(ev.Body.Text, ev.Body.Description),
			shownFrames: map[int]bool{}, shownRefs: map[int]bool{}}
	case *dap.ContinuedEvent:
		st.stop = nil
	case *dap.OutputEvent:
		// Kept apart: the adapters read the two pipes separately, so
		// interleaving them splits lines.
		switch ev.Body.Category {
		case "stdout":
			_, _ = st.stdout.Write([]byte(ev.Body.Output))
		case "stderr":
			_, _ = st.stderrOut.Write([]byte(ev.Body.Output))
		case "console", "important":
			_, _ = st.console.Write([]byte(ev.Body.Output))
		}
	case *dap.ExitedEvent:
		code := ev.Body.ExitCode
		st.exitCode = &code
		st.stop = nil
	case *dap.TerminatedEvent:
		st.terminated = true
		st.stop = nil
		return true
	case *dap.BreakpointEvent:
		st.updateBreakpoint(ev.Body.Reason, ev.Body.Breakpoint)
	}
	return false
}

// updateBreakpoint applies a breakpoint event to the stored results, by
// breakpoint id. Called with mu held.
func (st *programState) updateBreakpoint(reason string, bp dap.Breakpoint) {
	if bp.Id == 0 {
		return
	}
	for file, list := range st.bps {
		for i, old := range list {
			if old.Id != bp.Id {
				continue
			}
			if reason == "removed" {
				st.bps[file] = append(list[:i], list[i+1:]...)
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

// ended says whether the adapter said the program terminated, and its
// exit code when it said that.
func (st *programState) ended() (terminated bool, exitCode *int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.terminated, st.exitCode
}

// stopped returns the current stop, or errRunning.
func (st *programState) stopped() (*stopState, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.stop == nil {
		return nil, errRunning
	}
	return st.stop, nil
}

// current is the current stop, nil while running.
func (st *programState) current() *stopState {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.stop
}

// resumed forgets the stop stop once the program was told to go on, unless
// it stopped again meanwhile.
func (st *programState) resumed(stop *stopState) {
	st.mu.Lock()
	if st.stop == stop {
		st.stop = nil
	}
	st.mu.Unlock()
}

// fetched records the thread and the top frame fetched for stop (tid 0
// and no frames for what could not be fetched).
func (st *programState) fetched(stop *stopState, tid int, frames []dap.StackFrame) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if stop.threadID == 0 {
		stop.threadID = tid
	}
	if len(frames) > 0 {
		stop.frame = &frames[0]
		stop.shownFrames[frames[0].Id] = true
	}
}

// topFrame is the id of the current stop's fetched top frame, 0 for none.
func (st *programState) topFrame() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.stop != nil && st.stop.frame != nil {
		return st.stop.frame.Id
	}
	return 0
}

// noteFrames records frames shown to the model during the stop stop: the
// frame ids it may pass back.
func (st *programState) noteFrames(stop *stopState, frames []dap.StackFrame) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, f := range frames {
		stop.shownFrames[f.Id] = true
	}
}

// noteRef records a variables reference shown during the stop stop.
func (st *programState) noteRef(stop *stopState, ref int) {
	if ref <= 0 {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	stop.shownRefs[ref] = true
}

// shownFrame says whether frame id was shown during the stop stop, and
// the stop's thread.
func (st *programState) shownFrame(stop *stopState, id int) (known bool, threadID int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return stop.shownFrames[id], stop.threadID
}

// checkRef refuses a variables reference not given out during the
// current stop: references last only until the program moves, and an
// adapter answers an old one with nothing (lldb-dap: "0 children") or
// with another variable's children.
func (st *programState) checkRef(stop *stopState, ref int) error {
	st.mu.Lock()
	known := stop.shownRefs[ref]
	st.mu.Unlock()
	if known {
		return nil
	}
	return fmt.Errorf("reference %d is not valid where the program is stopped now: references last only until the program moves, and only those given by scopes, variables or evaluate since it stopped here count; call scopes with a frame_id from stack for fresh ones", ref)
}

// setBreakpoints keeps the adapter's answer for a file (as the adapter
// names it).
func (st *programState) setBreakpoints(file string, bps []breakpoint) {
	st.mu.Lock()
	st.bps[file] = bps
	st.mu.Unlock()
}

// holdBack keeps the stored breakpoints the handshake did not send.
func (st *programState) holdBack(held map[string][]int) {
	st.mu.Lock()
	st.heldBack = held
	st.mu.Unlock()
}

// breakpoints is the adapter's answer for a file, as the adapter names it.
func (st *programState) breakpoints(file string) []breakpoint {
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]breakpoint(nil), st.bps[file]...)
}

// breakpointText reports one file's breakpoints (a path as the adapter
// sees it) as the adapter answered, its paths shown through p.
func (st *programState) breakpointText(p paths, mapped string) string {
	var b strings.Builder
	for _, bp := range st.breakpoints(mapped) {
		fmt.Fprintf(&b, "%s:%d ", p.show(mapped), bp.requested)
		if bp.Line != bp.requested {
			fmt.Fprintf(&b, "(moved by the adapter to line %d, the nearest with code) ", bp.Line)
		}
		if bp.Verified {
			b.WriteString("verified")
		} else {
			b.WriteString("unverified")
			if bp.Message != "" {
				b.WriteString(": " + cutValue(p.relative(bp.Message)))
			}
		}
		if src := p.sourceLine(mapped, bp.Line); src != "" {
			fmt.Fprintf(&b, "\n  %d | %s", bp.Line, src)
		}
		b.WriteString("\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// writeBreakpoints adds the adapter's answer for every file to b, and
// the breakpoints held back from adapter (which does not debug their
// language).
func (st *programState) writeBreakpoints(b *strings.Builder, p paths, adapter string) {
	st.mu.Lock()
	files := make([]string, 0, len(st.bps))
	for f := range st.bps {
		files = append(files, f)
	}
	held := make([]string, 0, len(st.heldBack))
	for f := range st.heldBack {
		held = append(held, f)
	}
	heldLines := st.heldBack
	st.mu.Unlock()
	if len(files) > 0 {
		b.WriteString("breakpoints:\n")
		for _, f := range sorted(files) {
			if t := st.breakpointText(p, f); t != "" {
				b.WriteString(t + "\n")
			}
		}
	}
	if len(held) == 0 {
		return
	}
	var list []string
	for _, f := range sorted(held) {
		for _, l := range heldLines[f] {
			list = append(list, fmt.Sprintf("%s:%d", p.root.Rel(f), l))
		}
	}
	if len(list) > heldShown {
		list = append(list[:heldShown], fmt.Sprintf("… %d more", len(list)-heldShown))
	}
	fmt.Fprintf(b, "held back, not %s's languages (a launch of a program in their language sets them): %s\n", adapter, strings.Join(list, ", "))
}

// heldShown caps the held-back breakpoints a launch lists.
const heldShown = 20
