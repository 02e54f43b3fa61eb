package debug

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/berth-dev/berth/internal/errclass"
	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// operate runs one operation, under the conversation's lock.
func (p *Provider) operate(ctx context.Context, run *orchestrator.Run, c *conversation, a args) (string, error) {
	switch a.Operation {
	case "status":
		return p.status(ctx, run, c), nil
	case "breakpoints":
		return p.breakpoints(ctx, run, c, a.File, a.Lines)
	case "launch":
		return p.launch(ctx, run, c, a.Program, a.Args)
	case "attach":
		return p.attach(ctx, run, c, a.Port)
	case "output":
		return p.output(c), nil
	case "terminate":
		return p.terminate(c), nil
	}
	s, err := p.live(c)
	if err != nil {
		return "", err
	}
	switch a.Operation {
	case "continue":
		return s.resume(ctx, "continue", a.ThreadID)
	case "step_over":
		return s.resume(ctx, "next", a.ThreadID)
	case "step_in":
		return s.resume(ctx, "stepIn", a.ThreadID)
	case "step_out":
		return s.resume(ctx, "stepOut", a.ThreadID)
	case "pause":
		return s.pause(ctx, a.ThreadID)
	case "threads":
		return s.threads(ctx)
	case "stack":
		return s.stack(ctx, a.ThreadID)
	case "scopes":
		return s.scopes(ctx, a.FrameID)
	case "variables":
		return s.variables(ctx, a.Reference)
	case "evaluate":
		return s.evaluate(ctx, a.Expression, a.FrameID)
	}
	return "", fmt.Errorf("unknown operation %q", a.Operation)
}

// live returns the conversation's running session, or says there is none.
func (p *Provider) live(c *conversation) (*session, error) {
	s, last := p.current(c)
	if s != nil && s.alive() {
		return s, nil
	}
	msg := "no debug session is running in this conversation: set breakpoints, then call launch with a program (or attach with a port)"
	switch {
	case last != nil:
		msg += "; the last one " + strings.TrimPrefix(last.endText(), "the session ")
	case c.restarted:
		msg = "no debug session is running in this conversation: " + restartedNote
	}
	return nil, errors.New(msg)
}

// adapters reports, for each adapter, whether its root marker and its
// executable were found, and why not.
func (p *Provider) adapters(ctx context.Context, run *orchestrator.Run) string {
	var b strings.Builder
	for i := range p.cfg.Adapters {
		a := &p.cfg.Adapters[i]
		f := p.detect(ctx, run, a, run.Workdir)
		if f.usable() {
			in := "the working directory"
			if f.root != run.Workdir {
				in = workspace.Rel(run.Workdir, f.root)
			}
			fmt.Fprintf(&b, "%s: usable (marker %s in %s, executable %s)\n", a.ID, f.marker, in, f.exe)
			continue
		}
		fmt.Fprintf(&b, "%s: not usable: %s", a.ID, f.why())
		if f.noMarker == "" {
			fmt.Fprintf(&b, " (marker %s found)", f.marker)
		}
		if f.noExe == "" {
			fmt.Fprintf(&b, " (executable %s found)", f.exe)
		}
		b.WriteString("\n")
	}
	b.WriteString("Markers are looked for at the top of the working directory here; launch looks from the program's directory upward.")
	return b.String()
}

// status says whether a session runs, and where it stopped.
func (p *Provider) status(ctx context.Context, run *orchestrator.Run, c *conversation) string {
	s, last := p.current(c)
	if s != nil && s.alive() {
		age := time.Since(s.started).Round(time.Second)
		left := (s.cfg.SessionTTL - time.Since(s.started)).Round(time.Second)
		return fmt.Sprintf("session: %s debugging %s, started %s ago (ends in %s, its time to live)\n%s",
			s.adapter.ID, s.program, age, left, s.describeStop(ctx))
	}
	msg := "no debug session is running in this conversation"
	switch {
	case last != nil:
		msg += fmt.Sprintf("; the last one (%s, %s) %s", last.adapter.ID, last.program, strings.TrimPrefix(last.endText(), "the session "))
	case c.restarted:
		msg += ": " + restartedNote
	}
	if n := len(c.bps); n > 0 {
		msg += fmt.Sprintf("\nstored breakpoints in %s; launch sets them", text.Count(n, "file"))
	}
	if pb := p.prebuildsOf(run).describe(run.Workdir); pb != "" {
		msg += "\n" + pb
	}
	return msg
}

// breakpoints stores a file's lines and, in a session, sets them at once.
func (p *Provider) breakpoints(ctx context.Context, run *orchestrator.Run, c *conversation, file string, lines []int) (string, error) {
	root, err := run.Root()
	if err != nil {
		return "", err
	}
	abs, err := root.Resolve(file)
	if err != nil {
		return "", err
	}
	// A line past the end would be stored, sent, and left unverified (or
	// silently moved) by the adapter: refuse it here, with the length.
	n, err := countLines(abs)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is the host's: file says it
		}
		return "", fmt.Errorf("%s is not a readable file (%v): pass a source file inside the working directory", file, err)
	}
	var past []string
	for _, l := range lines {
		if l > n {
			past = append(past, fmt.Sprint(l))
		}
	}
	if len(past) > 0 {
		which := "line " + past[0] + " is"
		if len(past) > 1 {
			which = "lines " + strings.Join(past, ", ") + " are"
		}
		return "", fmt.Errorf("%s has %s, so %s past its end: pass lines from 1 to %d (no breakpoint was changed)",
			root.Rel(abs), text.Count(n, "line"), which, n)
	}
	lines = c.setLines(abs, lines)
	s, _ := p.current(c)
	if s == nil || !s.alive() {
		if len(lines) == 0 {
			return fmt.Sprintf("cleared the breakpoints of %s", root.Rel(abs)), nil
		}
		pp := paths{root: root, anywhere: true} // abs is the host's, inside the root
		var b strings.Builder
		fmt.Fprintf(&b, "stored %s in %s; launch sets them and says which the adapter verified:", text.Count(len(lines), "breakpoint"), root.Rel(abs))
		for _, l := range lines {
			fmt.Fprintf(&b, "\n%s:%d", root.Rel(abs), l)
			if src := pp.sourceLine(abs, l); src != "" {
				fmt.Fprintf(&b, "\n  %d | %s", l, src)
			}
		}
		return b.String(), nil
	}
	if !s.adapter.takes(abs) {
		what := fmt.Sprintf("stored %s in %s", text.Count(len(lines), "breakpoint"), root.Rel(abs))
		if len(lines) == 0 {
			what = "cleared the breakpoints of " + root.Rel(abs)
		}
		return fmt.Sprintf("%s; not sent to the running %s session, which does not debug %s files: a launch of a program in their language sets them",
			what, s.adapter.ID, extOf(abs)), nil
	}
	if err := s.setBreakpoints(ctx, abs, lines); err != nil {
		return "", err
	}
	if len(lines) == 0 {
		return fmt.Sprintf("cleared the breakpoints of %s", root.Rel(abs)), nil
	}
	return s.breakpointText(abs), nil
}

// refuseSecond refuses a launch or attach while a session lives.
func (p *Provider) refuseSecond(c *conversation) error {
	if s, _ := p.current(c); s != nil && s.alive() {
		return fmt.Errorf("a debug session is already running in this conversation: %s debugging %s, started %s ago; keep using it, or call terminate first",
			s.adapter.ID, s.program, time.Since(s.started).Round(time.Second))
	}
	return nil
}

// newSessionFor builds a session for the run and makes it the
// conversation's; the run that starts it owns it.
func (p *Provider) newSessionFor(run *orchestrator.Run, c *conversation, a *Adapter, program string) (*session, error) {
	root, err := run.Root()
	if err != nil {
		return nil, err
	}
	pp := paths{root: root, anywhere: run.Enclosure.Capabilities().SharedFiles, toAdapter: run.Enclosure.MapPath, toHost: run.Enclosure.HostPath}
	s := newSession(&p.cfg, a, p.metrics, pp, program)
	s.link.driver, s.link.enc = run.Enclosure.Driver(), run.Enclosure
	p.adopt(c, s)
	run.OnEnd(func() { s.end(run.SessionEndReason(), "the run that launched it ended") })
	return s, nil
}

// launch starts the program under its adapter, stopped at the stored
// breakpoints.
func (p *Provider) launch(ctx context.Context, run *orchestrator.Run, c *conversation, program string, progArgs []string) (string, error) {
	if err := p.refuseSecond(c); err != nil {
		return "", err
	}
	root, err := run.Root()
	if err != nil {
		return "", err
	}
	abs, err := root.Resolve(program)
	if err != nil {
		return "", err
	}
	a, err := p.adapterFor(abs, program)
	if err != nil {
		return "", err
	}
	dir := abs
	if st, err := os.Stat(abs); err == nil && !st.IsDir() {
		dir = filepath.Dir(abs)
	}
	f := p.detect(ctx, run, a, dir)
	if !f.usable() {
		return "", fmt.Errorf("%s cannot debug %s here: %s (the adapters operation shows every adapter): %w", a.ID, program, f.why(), errclass.ErrNotFound)
	}
	mappedProgram, err := run.Enclosure.MapPath(abs)
	if err != nil {
		return "", err
	}
	mappedDir, err := run.Enclosure.MapPath(run.Workdir)
	if err != nil {
		return "", err
	}
	adapterDir := ""
	if f.root != "" {
		if adapterDir, err = run.Enclosure.MapPath(f.root); err != nil {
			return "", err
		}
	}
	launchArgs, built := a.launchArgs(mappedProgram, progArgs, mappedDir, f.exe)
	if f.root != "" {
		p.yield(ctx, run, f.root)
	}

	s, err := p.newSessionFor(run, c, a, root.Rel(abs))
	if err != nil {
		return "", err
	}
	if built != "" && run.Enclosure.Capabilities().SharedFiles {
		s.link.removeAfter = built
	}
	// The adapter runs in the program's project root (the directory of
	// its marker): delve builds in its own directory, and from the working
	// directory go build finds no go.mod when the module is below it.
	if err := s.start(ctx, f.exe, adapterDir); err != nil {
		s.end(metrics.ReasonCrashed, "the adapter did not start: "+err.Error())
		return "", s.failed(fmt.Sprintf("launching %s with %s", root.Rel(abs), a.ID), err)
	}
	stop := s.link.c.watch(stopEvents...)
	if err := s.handshake(ctx, "launch", launchArgs, c.storedBreakpoints(), a.launchWait(&p.cfg)); err != nil {
		ferr := s.failed(fmt.Sprintf("launching %s with %s", root.Rel(abs), a.ID), err)
		s.end(metrics.ReasonCrashed, "the launch failed: "+err.Error())
		return "", ferr
	}
	s.markLive()
	s.keepFor(run, c.storedBreakpoints())
	var b strings.Builder
	fmt.Fprintf(&b, "launched %s with %s (the session ends by itself in %s)\n", root.Rel(abs), a.ID, p.cfg.SessionTTL)
	s.state.writeBreakpoints(&b, s.paths, s.adapter.ID)
	b.WriteString(s.waitStop(ctx, stop, p.cfg.StopWait))
	return b.String(), nil
}

// attach connects to a debugpy listening on port in the enclosure.
func (p *Provider) attach(ctx context.Context, run *orchestrator.Run, c *conversation, port int) (string, error) {
	if err := p.refuseSecond(c); err != nil {
		return "", err
	}
	var a *Adapter
	for i := range p.cfg.Adapters {
		if p.cfg.Adapters[i].ID == "debugpy" {
			a = &p.cfg.Adapters[i]
		}
	}
	if a == nil {
		return "", errors.New("attach needs the debugpy adapter, which the configuration does not list")
	}
	dctx, cancel := context.WithTimeout(ctx, p.cfg.RequestWait)
	conn, err := run.Enclosure.Dial(dctx, port)
	cancel()
	if err != nil {
		return "", fmt.Errorf("nothing accepts connections on port %d (%v): start the program with python -m debugpy --listen 127.0.0.1:%d --wait-for-client, then attach", port, err, port)
	}
	s, err := p.newSessionFor(run, c, a, fmt.Sprintf("the program on port %d", port))
	if err != nil {
		_ = conn.Close()
		return "", err
	}
	s.attach(conn)
	attachArgs := map[string]any{"request": "attach"}
	for k, v := range a.Launch {
		attachArgs[k] = v
	}
	if err := s.handshake(ctx, "attach", attachArgs, c.storedBreakpoints(), p.cfg.RequestWait); err != nil {
		ferr := s.failed(fmt.Sprintf("attaching to port %d", port), err)
		s.end(metrics.ReasonCrashed, "the attach failed: "+err.Error())
		return "", ferr
	}
	s.markLive()
	var b strings.Builder
	fmt.Fprintf(&b, "attached to the debugpy on port %d (the session ends by itself in %s; terminate detaches and leaves the program running)\n", port, p.cfg.SessionTTL)
	s.state.writeBreakpoints(&b, s.paths, s.adapter.ID)
	b.WriteString("the program runs: call status to see whether it stopped at a breakpoint, or pause")
	return b.String(), nil
}

// output is the debuggee's captured stdout and stderr, of the running
// session or the last one.
func (p *Provider) output(c *conversation) string {
	s, last := p.current(c)
	if s == nil {
		s = last
	}
	if s == nil {
		if c.restarted {
			return "no output: no debug session has run in this conversation since Berth restarted. " + restartedNote
		}
		return "no output: no debug session has run in this conversation"
	}
	out, errOut := s.paths.shown(s.state.stdout.report()), s.paths.shown(s.state.stderrOut.report())
	if out == "" && errOut == "" {
		return "the program has printed nothing yet"
	}
	var b strings.Builder
	for _, part := range []struct{ name, text string }{{"stdout", out}, {"stderr", errOut}} {
		if part.text != "" {
			fmt.Fprintf(&b, "%s:\n%s\n", part.name, strings.TrimRight(part.text, "\n"))
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// terminate ends the running session.
func (p *Provider) terminate(c *conversation) string {
	s, last := p.current(c)
	if s == nil || !s.alive() {
		if s == nil && last == nil && c.restarted {
			return "no debug session is running; nothing to terminate. " + restartedNote
		}
		return "no debug session is running; nothing to terminate"
	}
	age := time.Since(s.started).Round(time.Second)
	s.end(metrics.ReasonStopped, "terminated on request")
	if s.attached {
		return fmt.Sprintf("detached from %s after %s; the program keeps running", s.program, age)
	}
	return fmt.Sprintf("terminated %s (%s) after %s; the program and the adapter are stopped", s.program, s.adapter.ID, age)
}

// extOf is a file's extension for a message, or "extensionless".
func extOf(path string) string {
	if e := filepath.Ext(path); e != "" {
		return e
	}
	return "extensionless"
}
