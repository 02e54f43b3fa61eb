package containerd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	cerrdefs "github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/relayexec"
	"github.com/berth-dev/berth/internal/boundedio"
)

// execSpec is one exec: argv under the container's own process spec.
type execSpec struct {
	argv   []string
	env    []string
	dir    string
	user   *specs.User // nil: the container's
	stdin  bool        // a stdin FIFO: the bytes as they are, its close EOF
	stderr io.Writer   // nil: a FIFO the caller reads
	// kept: the relay holds its program when Berth goes away
	// (relayexec.Exec.Kept); the sweep leaves it running (owner.go).
	kept bool
}

// proc is one exec'd process, the relayexec.Stream of a start. Its owner
// goroutine (wait) reads the exit status, moves what is left of the
// output into memory, deletes the process (which removes its FIFOs) and
// closes done.
type proc struct {
	c      *container
	own    *owner // the driver's claim, given back once deleted
	proc   client.Process
	dio    *cio.DirectIO
	stdinW io.WriteCloser // the stdin FIFO; nil without stdin
	stdout *stream
	stderr *stream // nil when execSpec.stderr was given

	exit     <-chan client.ExitStatus
	stopWait context.CancelFunc
	exited   chan struct{} // closed once the exit status is in
	done     chan struct{}
	copying  sync.WaitGroup // the copy to execSpec.stderr
	code     int
	err      error
}

var (
	_ relayexec.Stream    = (*proc)(nil)
	_ relayexec.Signaller = (*proc)(nil)
)

// exec starts s in the container's task: the exec's FIFOs are made in
// the driver's FIFO directory and opened by Berth directly (cio's
// DirectIO: no copying goroutines), Wait is called before Start so the
// exit cannot be missed, and stdin is closed on the shim's side with
// CloseIO once Start returned (earlier is lost).
func (c *container) exec(ctx context.Context, s execSpec) (*proc, error) {
	own, err := c.d.acquire()
	if err != nil {
		return nil, err
	}
	// Given back once the exec and its FIFO directory are gone: by the
	// handle's owner goroutine, or here when the exec did not start (its
	// FIFOs went with the failed Exec, or abandon).
	started := false
	defer func() {
		if !started {
			c.d.release(own)
		}
	}()
	id := own.execID(s.kept)
	p := *c.spec.Process
	p.Terminal = false
	p.ConsoleSize = nil
	p.Args = s.argv
	if s.dir != "" {
		p.Cwd = s.dir
	}
	p.Env = mergeEnv(c.spec.Process.Env, s.env)
	if s.user != nil {
		p.User = *s.user
	}
	var dio *cio.DirectIO
	create := func(id string) (cio.IO, error) {
		// The directory's name says whose exec it is (owner.go).
		dir := filepath.Join(c.d.opts.FIFODir, execDir(id, c.d.opts.Namespace, c.id))
		if err := os.Mkdir(dir, 0o700); err != nil {
			return nil, err
		}
		fifos := cio.NewFIFOSet(cio.Config{
			Stdin:  filepath.Join(dir, "stdin"),
			Stdout: filepath.Join(dir, "stdout"),
			Stderr: filepath.Join(dir, "stderr"),
		}, func() error { return os.RemoveAll(dir) })
		if !s.stdin {
			fifos.Stdin = ""
		}
		d, err := cio.NewDirectIO(context.Background(), fifos)
		dio = d
		return d, err
	}
	c.d.ready()
	if e := c.d.silence.Now(); e != nil {
		return nil, fmt.Errorf("containerd container %s: exec %s: %w", c.id, s.argv[0], e)
	}
	cctx, cancel := c.d.ctx(ctx)
	defer cancel()
	pr, err := c.task.Exec(cctx, id, &p, create)
	if err != nil {
		return nil, c.failed(ctx, "exec "+s.argv[0], err)
	}
	// Wait outlives ctx: it ends with the process (or when stopWait is
	// called because the process never started).
	wctx, stopWait := context.WithCancel(namespaces.WithNamespace(context.Background(), c.d.opts.Namespace))
	exit, err := pr.Wait(wctx)
	if err != nil {
		stopWait()
		c.abandon(pr, dio)
		return nil, c.failed(ctx, "exec "+s.argv[0], err)
	}
	if err := pr.Start(cctx); err != nil {
		stopWait()
		c.abandon(pr, dio)
		return nil, c.failed(ctx, "starting "+s.argv[0], err)
	}
	h := &proc{
		c: c, own: own, proc: pr, dio: dio, exit: exit, stopWait: stopWait,
		exited: make(chan struct{}), done: make(chan struct{}),
	}
	started = true
	var stdinErr error
	if s.stdin {
		h.stdinW = dio.Stdin
		// The shim opened the FIFO at Start; a write of nothing returns
		// once Berth's end is open too. Then the shim lets go of its own
		// writer, so the FIFO's EOF is Berth's close, or Berth's death.
		if _, stdinErr = dio.Stdin.Write(nil); stdinErr == nil {
			stdinErr = pr.CloseIO(cctx, client.WithStdinCloser)
		}
	}
	h.stdout = &stream{fifo: dio.Stdout}
	if s.stderr != nil {
		h.copying.Go(func() { _, _ = io.Copy(s.stderr, dio.Stderr) })
	} else {
		h.stderr = &stream{fifo: dio.Stderr}
	}
	go h.wait()
	if stdinErr != nil {
		// Without CloseIO the relay would never read EOF: end it now.
		h.kill()
		return nil, c.failed(ctx, "closing the shim's end of stdin of "+s.argv[0], stdinErr)
	}
	return h, nil
}

// abandon cleans up after an exec that did not start: the shim's state
// of it and its FIFOs.
func (c *container) abandon(proc client.Process, dio *cio.DirectIO) {
	ctx, cancel := c.d.ctx(context.Background())
	defer cancel()
	if _, err := proc.Delete(ctx); err != nil && dio != nil {
		dio.Cancel()
		_ = dio.Close()
	}
}

// mergeEnv is base with each KEY=VALUE of add replacing base's KEY.
func mergeEnv(base, add []string) []string {
	out := make([]string, 0, len(base)+len(add))
	idx := map[string]int{}
	for _, kv := range append(append([]string(nil), base...), add...) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}

// Pid is the relay's pid as the host sees it (containerd reports host
// pids).
func (h *proc) Pid() int { return int(h.proc.Pid()) }

// Stdin is the relay's stdin FIFO.
func (h *proc) Stdin() io.WriteCloser {
	if h.stdinW == nil {
		return nopWriteCloser{}
	}
	return h.stdinW
}
func (h *proc) Stdout() io.Reader { return h.stdout }
func (h *proc) Stderr() io.Reader {
	if h.stderr == nil {
		return nil
	}
	return h.stderr
}

// Ended is closed once the exit status is in.
func (h *proc) Ended() <-chan struct{} { return h.exited }

func (h *proc) Wait() (int, error) {
	<-h.done
	return h.code, h.err
}

// callTimeout bounds the calls that carry a signal or delete a process.
const callTimeout = 10 * time.Second

// Signal sends sig to the relay, which passes it to the program's group.
// containerd signals an exec'd process itself, so no second exec carries
// it (as "relay signal" must for Docker).
func (h *proc) Signal(ctx context.Context, sig syscall.Signal) error {
	cctx, cancel := h.c.d.ctx(ctx)
	defer cancel()
	if err := h.proc.Kill(cctx, sig); err != nil {
		if cerrdefs.IsNotFound(err) {
			return fmt.Errorf("signal %v: the process has exited", sig)
		}
		return h.c.failed(cctx, fmt.Sprintf("signal %v", sig), err)
	}
	return nil
}

// Drop closes the relay's stdin: its EOF ends the run, even when
// containerd is down (the relay reads the FIFO's EOF).
func (h *proc) Drop() {
	if h.stdinW != nil {
		_ = h.stdinW.Close()
	}
}

// kill ends an exec the driver runs for itself (a short mode, a dial):
// SIGTERM, then the relay's stdin closed.
func (h *proc) kill() {
	select {
	case <-h.done:
	default:
		_ = h.Signal(context.Background(), syscall.SIGTERM)
	}
	h.Drop()
}

// unavailableWait bounds how long the owner waits, across failed calls,
// for containerd to answer again about the exit (a containerd restart):
// the process itself runs on meanwhile, under its shim.
const unavailableWait = 2 * time.Minute

func (h *proc) wait() {
	h.code, h.err = h.exitStatus()
	close(h.exited)
	// Deleting the process closes its FIFOs: first what is left in them
	// goes to memory, and a Cmd.Stderr gets the rest of its copy.
	h.stdout.drain()
	if h.stderr != nil {
		h.stderr.drain()
	}
	h.copying.Wait()
	h.delete()
	close(h.done)
}

// exitStatus waits for the exit, waiting again while containerd does not
// answer.
func (h *proc) exitStatus() (int, error) {
	var since time.Time
	for {
		es := <-h.exit
		code, _, err := es.Result()
		if err == nil {
			h.stopWait()
			return int(code), nil
		}
		if !isUnavailable(err) {
			h.stopWait()
			h.kill()
			return -1, h.c.failed(context.Background(), "the process's exit status", err)
		}
		if since.IsZero() {
			since = time.Now()
		}
		if time.Since(since) > unavailableWait {
			h.stopWait()
			h.kill()
			return -1, fmt.Errorf("containerd container %s: the process's exit status: containerd at %s did not answer for %v: %v: %w", h.c.id, h.c.d.opts.Address, unavailableWait, err, enclosure.ErrUnavailable)
		}
		time.Sleep(200 * time.Millisecond)
		var werr error
		ctx, cancel := context.WithCancel(namespaces.WithNamespace(context.Background(), h.c.d.opts.Namespace))
		h.stopWait = cancel
		if h.exit, werr = h.proc.Wait(ctx); werr != nil {
			cancel()
			return -1, werr
		}
	}
}

// Gone says whether the container's task has stopped, for a process a
// signal ended: a task that stops takes every exec with it (its pid
// namespace ends), and containerd may report the exec's exit a moment
// before the task's, so it asks a few times.
func (c *container) Gone(ctx context.Context) error {
	for range 10 {
		cctx, cancel := c.d.ctx(ctx)
		_, err := c.runningTask(cctx)
		cancel()
		if errors.Is(err, enclosure.ErrNotFound) {
			return fmt.Errorf("the process ended with its container: %w", err)
		}
		if err != nil {
			return nil // containerd did not answer: the exit code says enough
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// delete deletes the exited process in the shim, which also closes and
// removes its FIFOs. When that fails (containerd did not answer, five
// times), the FIFOs are closed but their directory stays: it is the
// record by which a later Attach's sweep deletes the process (owner.go).
func (h *proc) delete() {
	defer h.c.d.release(h.own)
	var err error
	for i := 0; ; i++ {
		ctx, cancel := h.c.d.ctx(context.Background())
		_, err = h.proc.Delete(ctx)
		cancel()
		if err == nil || cerrdefs.IsNotFound(err) || !isUnavailable(err) || i >= 5 {
			break
		}
		time.Sleep(time.Second)
	}
	h.dio.Cancel()
	if err != nil && !cerrdefs.IsNotFound(err) {
		if h.err == nil {
			h.c.d.opts.Log.Warn("containerd: deleting an exec'd process failed; the next Attach will", "container", h.c.id, "exec", h.proc.ID(), "err", err)
		}
		for _, f := range []io.Closer{h.dio.Stdin, h.dio.Stdout, h.dio.Stderr} {
			if f != nil {
				_ = f.Close()
			}
		}
		return
	}
	_ = h.dio.Close() // removes the FIFO directory (again: Delete did)
}

// stream is one of the exec's output FIFOs as the caller reads it. Once
// the process has exited, the owner drains what is left into memory
// (a FIFO holds little), so the process can be deleted, and its FIFOs
// removed, whether or not the caller ever reads.
type stream struct {
	mu     sync.Mutex // held across a read of the FIFO
	fifo   io.Reader  // nil once drained
	rest   []byte     // what the owner drained and the caller has not read
	closed bool       // the caller let go: reads are EOF
}

func (s *stream) Read(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, io.EOF
	}
	if len(s.rest) > 0 {
		n := copy(b, s.rest)
		s.rest = s.rest[n:]
		return n, nil
	}
	if s.fifo == nil {
		return 0, io.EOF
	}
	n, err := s.fifo.Read(b)
	if err != nil {
		// EOF, or the FIFO closed under the reader: either way the end.
		s.fifo = nil
		err = io.EOF
	}
	return n, err
}

// Close is the reader's: it stops reading; what is left is dropped (the
// owner's drain still empties the FIFO).
func (s *stream) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed, s.rest = true, nil
	return nil
}

// drain reads the FIFO to EOF into memory: the process has exited, so its
// writers close once the shim has copied the last of its output. What is
// left is little (the pipes' buffers); a writer that outlived the process
// and writes on is read to its end but kept to maxDrain (issue 24 item 1).
func (s *stream) drain() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fifo == nil {
		return
	}
	b := boundedio.Buffer{Max: maxDrain}
	_, _ = io.Copy(&b, s.fifo)
	s.fifo = nil
	if !s.closed {
		s.rest = append(s.rest, b.Bytes()...)
	}
}

// maxDrain bounds what drain keeps of an exited process's output.
const maxDrain = 1 << 20

type nopWriteCloser struct{}

func (nopWriteCloser) Write(b []byte) (int, error) { return 0, fmt.Errorf("the process has no stdin") }
func (nopWriteCloser) Close() error                { return nil }
