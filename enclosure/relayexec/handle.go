package relayexec

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relay/wire"
)

// handle is one process started under the relay, whatever engine carries
// its exec. Its owner goroutine (wait) waits for the exec's end, tells a
// kill of Berth's from a container that stopped under the process, and
// closes done. With a stdio socket, stdin and stdout go through the
// socket, and the exec's stream carries stderr, signals and the end of
// the run.
type handle struct {
	c      *Container
	s      Stream
	tag    string
	frames *relay.FrameWriter // the relay's stdin: signals, and stdin without a socket
	stdin  io.WriteCloser

	socket *relay.SocketStdio // nil without a socket

	// A kept process's (Cmd.Keep): the program's stdio as its relay
	// handed it over, and its hold socket ("" when it does not hold:
	// why says why).
	handed     *relay.Handover
	held, why  string
	stderr     io.Reader
	waitStderr func()

	done chan struct{}
	code int
	err  error

	killed atomic.Bool
	// signalled is set once Berth sent the process a signal: an exit by
	// a signal is then Berth's doing, not the container's.
	signalled atomic.Bool
	killOnce  sync.Once
}

var (
	_ enclosure.Process  = (*handle)(nil)
	_ enclosure.Tagged   = (*handle)(nil)
	_ enclosure.Kept     = (*handle)(nil)
	_ enclosure.Dropper  = (*handle)(nil)
	_ enclosure.Resident = (*handle)(nil)
)

// newHandle owns s from here. With socket set, stdin and stdout come
// with attach.
func newHandle(c *Container, s Stream, tag string, socket bool) *handle {
	h := &handle{c: c, s: s, tag: tag, frames: relay.NewFrameWriter(s.Stdin()), done: make(chan struct{})}
	h.stdin = h.frames
	if socket {
		h.socket = relay.NewSocketStdio()
	}
	go h.wait()
	return h
}

// attach gives a socket handle its connection (nil: none came): stdin
// writes to it, and Stdout reads it. A connection comes at most once.
func (h *handle) attach(conn *net.UnixConn) {
	if conn != nil {
		h.stdin = relay.SocketStdin(conn)
	}
	h.socket.Attach(conn)
}

// Pid is the relay's pid as Berth sees it, when the engine says (0
// otherwise: its Tag names it, enclosure.Describe).
func (h *handle) Pid() int { return h.s.Pid() }

// Tag is the relay's tag, which names the process should its pid be
// unknown.
func (h *handle) Tag() string { return h.tag }

func (h *handle) Stdin() io.WriteCloser { return h.stdin }

// RSS asks the relay, in an exec, for the resident memory of the program
// and everything it started (the relay's mem mode finds itself by tag).
func (h *handle) RSS(ctx context.Context) (int64, error) {
	return relay.Memory(ctx, h.c.Engine.Run, h.c.Relay, h.tag, h.c.Where)
}

// Stdout is the program's stdout: the pipe its relay handed over, its
// socket, or the exec's stream.
func (h *handle) Stdout() io.Reader {
	if h.handed != nil {
		return h.handed.Stdout
	}
	if conn := h.socket.Conn(); conn != nil {
		return relay.SocketStdout(conn)
	}
	return h.s.Stdout()
}

// Stderr is the exec's stream's, which a kept process's relay merges
// with the program's pipe.
func (h *handle) Stderr() io.Reader {
	if h.handed != nil {
		return h.stderr
	}
	return h.s.Stderr()
}

// handOver reads the held program's stdio from its relay on conn
// (closed after), and makes it the handle's: stdin the pipe's write end
// (its Close an empty frame too, for the relay's copy), stdout the
// pipe, stderr the program's merged with the relay's own (into dst when
// given, as the engine copies the relay's there).
func (h *handle) handOver(conn *net.UnixConn, dst io.Writer) error {
	defer conn.Close()
	handed, err := relay.ReadHandover(conn, handoverWait)
	if err != nil {
		return err
	}
	h.handed, h.held, h.why = handed, handed.Hold, handed.HoldError
	if handed.Stdin != nil {
		h.stdin = relay.HeldStdin(handed.Stdin, h.frames)
	}
	var own io.ReadCloser
	if dst == nil {
		if r := h.s.Stderr(); r != nil {
			own = io.NopCloser(r)
		}
	}
	r, wait := relay.MergeStderr(dst, own, handed.Stderr)
	h.stderr, h.waitStderr = r, wait
	return nil
}

// notHandedOver explains a handover that did not come: the relay
// connected, then ended before the program ran (a directory or a program
// it could not use), which its exit code says, or the handover itself
// failed (err).
func (h *handle) notHandedOver(err error) error {
	// A relay that ended closed the socket as it exited: its exec ends
	// at once.
	select {
	case <-h.done:
	case <-time.After(copyWait):
		return err
	}
	code, werr := h.Wait()
	switch {
	case werr != nil:
		return werr // the container stopped, or its engine went
	case code == wire.ExitNotFound:
		return fmt.Errorf("the relay ended before it ran the program (exit %d: not found; its stderr says more): %w", code, enclosure.ErrNotFound)
	case code == wire.ExitNotExec || code == wire.ExitRelayFailed:
		return fmt.Errorf("the relay ended before it ran the program (exit %d: the program or its directory could not be used; its stderr says why): %w", code, err)
	}
	return err
}

// handoverWait bounds the wait for a held program's stdio, which its
// relay sends once the program started.
const handoverWait = 30 * time.Second

// Held is where the relay waits for a Berth that comes back.
func (h *handle) Held() (socket, tag, why string) { return h.held, h.tag, h.why }

// Drop lets go of the exec without a signal, as a Berth that died would:
// the relay reads its stdin's EOF and ends the run, or, for a kept
// process, holds it; Berth's copies of a held program's stdio close.
func (h *handle) Drop() {
	h.s.Drop()
	if h.handed != nil {
		h.handed.Close()
	}
}
func (h *handle) Done() <-chan struct{} { return h.done }

func (h *handle) Wait() (int, error) {
	<-h.done
	return h.code, h.err
}

// signalTimeout bounds the call that carries a signal.
const signalTimeout = 10 * time.Second

// Signal has the relay pass sig to the process group: SIGINT only
// interrupts; SIGTERM, SIGHUP and SIGQUIT are followed by SIGKILL after
// the relay's grace. An engine that signals an exec itself (Signaller)
// carries it; else those three go in the relay's stdin, and SIGINT and
// any other by an exec of "relay signal".
func (h *handle) Signal(sig os.Signal) error {
	s, err := enclosure.CheckSignal(sig, h.done)
	if err != nil {
		return err
	}
	h.signalled.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), signalTimeout)
	defer cancel()
	if sg, ok := h.s.(Signaller); ok {
		return sg.Signal(ctx, s)
	}
	return relay.SendSignal(ctx, h.frames, h.c.Engine.Run, h.c.Relay, h.tag, s, h.c.Where)
}

// Kill ends the process and everything it started: the relay sends the
// group SIGTERM, then SIGKILL after its grace (the one kill grace, the
// relay's). Berth then lets go of the exec (Stream.Drop), which ends the
// run as well should the signal not arrive, so Done closes even when the
// engine is gone.
func (h *handle) Kill() error {
	h.killOnce.Do(func() {
		select {
		case <-h.done:
		default:
			h.killed.Store(true)
			_ = h.Signal(syscall.SIGTERM)
		}
		h.s.Drop()
	})
	return nil
}

// goneWait bounds the owner's look at a container that may be stopping.
const goneWait = 30 * time.Second

// copyWait bounds the wait for a kept process's stderr copies once its
// exec ended: its relay ends the whole tree first.
const copyWait = 2 * time.Second

func waitCopies(wait func()) {
	copied := make(chan struct{})
	go func() { wait(); close(copied) }()
	select {
	case <-copied:
	case <-time.After(copyWait):
	}
}

func (h *handle) wait() {
	code, err := h.s.Wait()
	lost := err != nil
	switch {
	case err != nil && h.killed.Load() && !enclosure.Down(err):
		code, err = -1, nil // Berth dropped the exec: its end is Berth's
	case err != nil:
		code = -1
	case h.killed.Load() && code > 128:
		code = -1 // the relay reports death by signal N as 128+N
	case code > 128 && !h.signalled.Load():
		// Killed by a signal Berth did not send: a container that
		// stopped says so, rather than leave the caller an exit status
		// it cannot explain. Only then: the engine's look may take a
		// moment, which a kernel stopped at every reset would wait too.
		ctx, cancel := context.WithTimeout(context.Background(), goneWait)
		if gerr := h.c.Engine.Gone(ctx); gerr != nil {
			code, err = -1, gerr
		}
		cancel()
	}
	if h.socket != nil {
		h.socket.End(lost)
	}
	if h.waitStderr != nil {
		waitCopies(h.waitStderr)
	}
	h.code, h.err = code, err
	close(h.done)
}
