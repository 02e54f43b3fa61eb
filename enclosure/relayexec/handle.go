package relayexec

import (
	"context"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/relay"
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

// Stdout is the program's stdout: its socket, or the exec's stream.
func (h *handle) Stdout() io.Reader {
	if conn := h.socket.Conn(); conn != nil {
		return relay.SocketStdout(conn)
	}
	return h.s.Stdout()
}

func (h *handle) Stderr() io.Reader     { return h.s.Stderr() }
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
	h.code, h.err = code, err
	close(h.done)
}
