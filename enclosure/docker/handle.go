package docker

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

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/internal/pipe"
	"github.com/berth-dev/berth/enclosure/relay"
)

// handle is one process started with exec under the relay. Its owner
// goroutine (wait) splits the exec's stream into stdout and stderr, then
// reads the exit code and closes done. With a stdio socket, stdout comes
// from the socket instead, and the exec's stream carries stderr alone.
type handle struct {
	c      *container
	execID string
	tag    string
	pid    int // the relay's host pid, set once before the handle is shared
	hj     client.HijackedResponse
	frames *relay.FrameWriter // the relay's stdin: signals, and stdin without a socket
	stdin  io.WriteCloser

	// streamEnded is closed when the exec's stream has ended.
	streamEnded chan struct{}
	socket      *relay.SocketStdio // nil without a socket
	*pipe.Output

	killed atomic.Bool
	// signalled is set once Berth sent the process a signal: an exit by
	// a signal is then Berth's doing, not the container's.
	signalled atomic.Bool
	killOnce  sync.Once
}

var _ enclosure.Process = (*handle)(nil)

// outputBytes is what each stream holds for a reader that is behind, as
// an OS pipe would: past it the exec's stream waits, as the process would
// wait on a full pipe.
const outputBytes = 256 << 10

// newHandle owns the exec's stream from here. With socket set, stdin and
// stdout come with attach.
func newHandle(c *container, execID, tag string, hj client.HijackedResponse, stderr io.Writer, socket bool) *handle {
	h := &handle{
		c: c, execID: execID, tag: tag, hj: hj,
		frames:      relay.NewFrameWriter(hj.Conn),
		streamEnded: make(chan struct{}),
		Output:      pipe.NewOutput(outputBytes, stderr),
	}
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

// Stdout is the program's stdout: its socket, or the exec's stream as
// the owner goroutine splits it.
func (h *handle) Stdout() io.Reader {
	if conn := h.socket.Conn(); conn != nil {
		return relay.SocketStdout(conn)
	}
	return h.Output.Stdout()
}

// Pid is the relay's pid as the host sees it, from the engine's exec
// inspect (0 for an exec the engine reported no pid for).
func (h *handle) Pid() int { return h.pid }

// Tag is the relay's tag, which names the process should its pid be
// unknown.
func (h *handle) Tag() string { return h.tag }

func (h *handle) Stdin() io.WriteCloser { return h.stdin }

// signalTimeout bounds the exec that carries a signal.
const signalTimeout = 10 * time.Second

// Signal has the relay pass sig to the process group: SIGINT only
// interrupts; SIGTERM, SIGHUP and SIGQUIT are followed by SIGKILL after
// the relay's grace. Those three go in the relay's stdin; SIGINT and any
// other by an exec of "relay signal".
func (h *handle) Signal(sig os.Signal) error {
	s, err := enclosure.CheckSignal(sig, h.Done())
	if err != nil {
		return err
	}
	h.signalled.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), signalTimeout)
	defer cancel()
	return relay.SendSignal(ctx, h.frames, h.c.run, h.c.relay, h.tag, s, "docker container "+h.c.name)
}

// Kill ends the process and everything it started: the relay sends the
// group SIGTERM, then SIGKILL after its grace. Dropping the connection
// afterwards ends the run as well should the signal not arrive (the
// relay reads its stdin's EOF), so Done closes even when the engine is
// gone.
func (h *handle) Kill() error {
	h.killOnce.Do(func() {
		select {
		case <-h.Done():
			return
		default:
		}
		h.killed.Store(true)
		_ = h.Signal(syscall.SIGTERM)
		h.hj.Close()
	})
	return nil
}

// exitWait bounds the wait for the engine to mark the exec ended once
// its stream closed: the relay's grace and its SIGKILL, with room.
const exitWait = 30 * time.Second

func (h *handle) wait() {
	stdout, stderr := h.Writers()
	if h.socket != nil {
		stdout = io.Discard // the relay writes nothing there; the program has the socket
	}
	_, err := stdcopy.StdCopy(stdout, stderr, h.hj.Reader)
	h.hj.Close()
	close(h.streamEnded)
	if h.socket == nil {
		h.CloseWrite()
	}
	ctx, cancel := context.WithTimeout(context.Background(), exitWait)
	defer cancel()
	var waitErr error
	code, ierr := h.c.exitCode(ctx, h.execID)
	switch {
	case ierr != nil:
		code, waitErr = -1, h.c.failed(ctx, "the process's exit code", ierr)
		// Whether it still runs is unknown: kill it by its tag once
		// the engine answers again.
		h.c.lose(h.tag)
	case h.killed.Load() && code > 128:
		code = -1 // the relay reports death by signal N as 128+N
	default:
		// Killed by a signal Berth did not send: a container that
		// stopped (docker stop or kill) says so, rather than leave the
		// caller an exit status it cannot explain.
		// Only then: gone looks for up to a second, which a kernel
		// stopped with SIGTERM at every reset would wait as well.
		if code > 128 && !h.signalled.Load() {
			if gerr := h.c.gone(ctx); gerr != nil {
				code, waitErr = -1, gerr
			}
		}
	}
	if waitErr == nil && err != nil && !h.killed.Load() {
		waitErr = fmt.Errorf("docker container %s: the process's output stream broke: %v", h.c.name, err)
	}
	if h.socket != nil {
		h.socket.End(ierr != nil)
		h.CloseWrite()
	}
	h.End(code, waitErr)
}
