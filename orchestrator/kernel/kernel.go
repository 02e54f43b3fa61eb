package kernel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/berth-dev/berth/bridge"
	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

// kernel is one interpreter process running a driver. Its reader goroutine
// owns the process's stdout and turns it into frames; cells consume them.
// The stderr goroutine keeps the tail of what the interpreter wrote before
// or outside the driver's capture (a crash report).
type kernel struct {
	interp  string
	proc    enclosure.Process
	w       *bridge.Writer
	frames  chan bridge.Frame // closed when stdout ends
	ended   chan struct{}     // closed by end: nobody reads frames any more
	stderr  *enclosure.Tail
	m       *metrics.Metrics
	driver  string // the enclosure's, for metrics
	mu      sync.Mutex
	readErr error // why the reader stopped before the end of stdout
	// inherited: the kernel was resumed after Berth restarted, and the
	// done of the cell that ran then has not come yet (only execute
	// reads and writes it, one cell at a time).
	inherited bool

	endOnce sync.Once
}

// startKernel starts the interpreter through the run's enclosure, hands it
// the driver and waits for its ready frame.
func startKernel(ctx context.Context, cfg Config, run *orchestrator.Run, lang string, m *metrics.Metrics) (*kernel, error) {
	interp, err := interpreter(cfg, run, lang)
	if err != nil {
		return nil, err
	}
	l, err := launchFor(lang, interp)
	if err != nil {
		return nil, err
	}
	if l.path != interp {
		// A launcher (node's shell) would say a missing interpreter only
		// once it ran, without its class: the interpreter is looked up
		// first (kept by the enclosure, so once a container).
		if _, err := run.Enclosure.LookPath(ctx, interp); err != nil {
			m.SessionFailed(metrics.KindKernel)
			return nil, fmt.Errorf("start %s: %w", interp, err)
		}
	}
	dir, err := run.Enclosure.MapPath(run.Workdir)
	if err != nil {
		return nil, err
	}
	stderr := enclosure.NewTail(8 << 10)
	proc, err := run.Enclosure.Start(run.Context(), enclosure.Cmd{
		Path:   l.path,
		Args:   l.args,
		Env:    []string{"MPLBACKEND=Agg", "PYTHONUNBUFFERED=1", fmt.Sprintf("BERTH_TABLE_ROWS=%d", cfg.TableRows), fmt.Sprintf("BERTH_TABLE_COLS=%d", cfg.TableColumns)},
		Dir:    dir,
		Stderr: stderr,
		// A kernel's variables are the work a restart of Berth must not
		// lose: its relay holds it for a Berth that comes back.
		Keep: &enclosure.Keep{Kind: metrics.KindKernel, Role: lang},
	})
	if err != nil {
		m.SessionFailed(metrics.KindKernel)
		return nil, fmt.Errorf("start %s: %w", interp, err)
	}
	k := &kernel{driver: run.Enclosure.Driver(), interp: interp, proc: proc, w: bridge.NewWriter(proc.Stdin()),
		frames: make(chan bridge.Frame, 256), ended: make(chan struct{}), stderr: stderr, m: m}
	ready := make(chan error, 1)
	go k.read(ready)
	// A write that fails means the interpreter is gone; the reader then
	// reports it with what the interpreter printed, which says more.
	go func() { _, _ = io.WriteString(proc.Stdin(), l.source) }()
	timer := time.NewTimer(cfg.StartTimeout)
	defer timer.Stop()
	select {
	case err = <-ready:
	case <-timer.C:
		err = fmt.Errorf("%s did not become ready within %s (kernels.start_timeout)", interp, cfg.StartTimeout)
	case <-ctx.Done():
		err = fmt.Errorf("start of %s cancelled: %w", interp, ctx.Err())
	}
	if err != nil {
		enclosure.Stop(proc, nil, stopGrace)
		m.SessionFailed(metrics.KindKernel)
		if tail := strings.TrimSpace(stderr.String()); tail != "" {
			err = fmt.Errorf("%w; it wrote to stderr:\n%s", err, tail)
		}
		return nil, err
	}
	m.SessionStarted(metrics.KindKernel, k.driver)
	return k, nil
}

// read is the reader goroutine: the handshake first, then every frame
// into k.frames until stdout ends.
func (k *kernel) read(ready chan<- error) {
	r := bridge.NewReader(k.proc.Stdout())
	_, noise, err := bridge.AwaitReady(r)
	if err != nil {
		close(k.frames)
		ready <- fmt.Errorf("%s: %w", k.interp, err)
		return
	}
	if noise != "" {
		k.frames <- bridge.Frame{Type: bridge.TypeStray, Text: noise}
	}
	ready <- nil
	k.readFrames(r)
}

// readFrames passes every frame of r to k.frames until stdout ends.
func (k *kernel) readFrames(r *bridge.Reader) {
	defer close(k.frames)
	for {
		f, err := r.Read()
		if err != nil {
			// A broken stream ends the kernel: nothing after it can be
			// trusted to be a frame.
			if !errors.Is(err, io.EOF) {
				k.mu.Lock()
				k.readErr = err
				k.mu.Unlock()
				_ = k.proc.Kill()
				// Reading to the end releases the pipe.
				_, _ = io.Copy(io.Discard, k.proc.Stdout())
			}
			return
		}
		select {
		case k.frames <- f:
		case <-k.ended:
			// Output printed while no cell ran can fill k.frames; once the
			// kernel is ended nobody will read it. Read the stream to its
			// end instead, which releases the pipe.
			_, _ = io.Copy(io.Discard, k.proc.Stdout())
			return
		}
	}
}

// stopGrace is how long a kernel has to exit after SIGTERM before it is
// killed: an interpreter ends at once unless a cell installed a handler
// for the signal, which then has this long.
const stopGrace = time.Second

// end stops the kernel (enclosure.Stop) and records why; only the first
// call counts.
func (k *kernel) end(reason string) {
	if k.retire(reason) {
		k.stop()
	}
}

// retire records that the kernel ends, and why, at once (metrics count it
// when Berth gives it up, not a grace later), and reports whether this was
// the first call: only that one goes on to stop it.
func (k *kernel) retire(reason string) (first bool) {
	k.endOnce.Do(func() {
		first = true
		close(k.ended)
		k.m.SessionEnded(metrics.KindKernel, k.driver, reason)
	})
	return first
}

// stop ends the process, with stopGrace after SIGTERM.
func (k *kernel) stop() { enclosure.Stop(k.proc, nil, stopGrace) }

// diedReason is why a kernel that ended during a cell ended, for metrics:
// error when Berth stopped it for breaking the protocol (a frame over the
// limit), crashed when it died on its own.
func (k *kernel) diedReason() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.readErr != nil {
		return metrics.ReasonError
	}
	return metrics.ReasonCrashed
}

// exitDescription says how the process ended, for a result.
func (k *kernel) exitDescription() string {
	select {
	case <-k.proc.Done():
	case <-time.After(5 * time.Second):
		return "it stopped answering"
	}
	code, err := k.proc.Wait()
	k.mu.Lock()
	readErr := k.readErr
	k.mu.Unlock()
	switch {
	case errors.Is(readErr, bridge.ErrFrameTooLarge):
		return fmt.Sprintf("it sent a message over the %d MB limit of the protocol, so Berth stopped it; return less at once, or write it to a file", bridge.MaxFrame>>20)
	case readErr != nil:
		return fmt.Sprintf("its messages could not be read (%v), so Berth stopped it", readErr)
	case err != nil:
		return fmt.Sprintf("it failed: %v", err)
	case code < 0:
		return "it was killed by a signal (a segfault, the OOM killer or a kill)"
	default:
		return fmt.Sprintf("it exited with status %d", code)
	}
}
