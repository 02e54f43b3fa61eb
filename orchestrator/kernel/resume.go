package kernel

import (
	"fmt"
	"io"
	"time"

	"github.com/berth-dev/berth/bridge"
	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
	"github.com/berth-dev/berth/orchestrator/state"
)

var _ orchestrator.Resumer = (*Provider)(nil)

// restartedCall is the error of a tool() call that was waiting for an
// answer when Berth went away (issue 29 item 3).
const restartedCall = "Berth restarted while this call was pending, so its answer is lost and whether the tool ran is unknown: check its effect before calling it again"

// Resume gives run back the kernel a Berth before this one started for
// it and left to its relay (issue 29 item 3): the interpreter goes on
// with its variables, its driver waiting for the next cell; Berth reads
// its frames again from where the pipe stands. rec.Role is its language.
// A cell that was running when Berth went away goes on, and its tool()
// calls still waiting fail with restartedCall; what it prints from then
// on, as anything printed while no cell runs, and its value or error
// (output.addInherited) come at the head of the next cell's output.
func (p *Provider) Resume(run *orchestrator.Run, rec state.Record, proc enclosure.Process) error {
	lang := rec.Role
	if lang != Python && lang != JavaScript {
		return fmt.Errorf("a kernel of language %q: use %q or %q", lang, Python, JavaScript)
	}
	ks := kernelsOf(run, p.tool.cfg, p.tool.m)
	stderr := enclosure.NewTail(8 << 10)
	if r := proc.Stderr(); r != nil {
		go func() { _, _ = io.Copy(stderr, r) }()
	}
	driver := run.Enclosure.Driver()
	k := &kernel{driver: driver, interp: lang + " kernel (resumed)", proc: proc, w: bridge.NewWriter(proc.Stdin()),
		frames: make(chan bridge.Frame, 256), ended: make(chan struct{}), stderr: stderr, m: p.tool.m, inherited: true}
	go k.readFrames(bridge.NewReader(proc.Stdout()))
	// A tool() call the cell running when Berth went away was waiting
	// on is answered by no one: the driver fails it now, so the cell
	// goes on (and ends) instead of waiting for ever. A driver older than
	// this frame ignores it. In its own goroutine: the driver reads its
	// stdin at all times, but a write must never hold the resume.
	go func() { _ = k.w.Write(bridge.Frame{Type: bridge.TypeRestarted, Error: restartedCall}) }()
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.closed {
		return orchestrator.ErrRunEnded
	}
	if _, ok := ks.live[lang]; ok {
		return fmt.Errorf("the run already has a %s kernel", lang)
	}
	s := &slot{k: k}
	s.idle = time.AfterFunc(ks.cfg.IdleTimeout, func() { ks.expire(lang, s) })
	ks.live[lang] = s
	p.tool.m.SessionResumed(metrics.KindKernel, driver)
	return nil
}
