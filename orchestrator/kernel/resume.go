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

// Resume gives run back the kernel a Berth before this one started for
// it and left to its relay (issue 29 item 3): the interpreter goes on
// with its variables, its driver waiting for the next cell; Berth reads
// its frames again from where the pipe stands. rec.Role is its language.
// A cell that was running when Berth went away is lost with that Berth:
// its frames are read and dropped, as output printed while no cell
// runs.
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
		frames: make(chan bridge.Frame, 256), ended: make(chan struct{}), stderr: stderr, m: p.tool.m}
	go k.readFrames(bridge.NewReader(proc.Stdout()))
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
