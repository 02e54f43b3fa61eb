package kubernetes

import (
	"context"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/client-go/tools/remotecommand"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/internal/pipe"
	"github.com/berth-dev/berth/enclosure/relay"
)

// handle is one process started through the exec subresource under the
// relay. Its owner goroutine (wait) holds the exec's stream until it
// ends, then reads the exit code from the stream's error and closes done.
// With a stdio socket, stdin and stdout go through the socket, and the
// exec's stream carries stderr, signals and the end of the run.
type handle struct {
	p      *pod
	tag    string
	stdinR *io.PipeReader     // what the exec's stream reads
	stdinW *io.PipeWriter     // closed: the relay reads EOF and ends the run
	frames *relay.FrameWriter // the relay's stdin: signals, and stdin without a socket
	stdin  io.WriteCloser

	socket *relay.SocketStdio // nil without a socket
	*pipe.Output

	streamed context.Context    // done once the stream has ended
	cancel   context.CancelFunc // drops the stream
	protocol string             // which carried the exec, once done
	killed   atomic.Bool
	// signalled is set once Berth sent the process a signal: an exit by
	// a signal is then Berth's doing, not the pod's.
	signalled atomic.Bool
	killOnce  sync.Once
}

var _ enclosure.Process = (*handle)(nil)

// outputBytes is what each stream holds for a reader that is behind, as
// an OS pipe would: past it the exec's stream waits.
const outputBytes = 256 << 10

// start opens the exec of argv and returns its handle at once: the stream
// is the owner goroutine's, so an exec the API server refuses (the pod
// deleted meanwhile) ends the process with the reason in Wait. token,
// when set, is a stdio socket's token line, the first thing the relay
// reads; stdin and stdout then come with attach.
func (p *pod) start(argv []string, tag string, stderr io.Writer, token string) *handle {
	ctx, cancel := context.WithCancel(context.Background())
	h := &handle{p: p, tag: tag, Output: pipe.NewOutput(outputBytes, stderr), streamed: ctx, cancel: cancel}
	h.stdinR, h.stdinW = io.Pipe()
	h.frames = relay.NewFrameWriter(h.stdinW)
	h.stdin = h.frames
	var stdin io.Reader = h.stdinR
	if token != "" {
		h.socket = relay.NewSocketStdio()
		stdin = io.MultiReader(strings.NewReader(token), h.stdinR)
	}
	go h.wait(ctx, argv, stdin)
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

// Stdout is the program's stdout: its socket, or the exec's stream.
func (h *handle) Stdout() io.Reader {
	if conn := h.socket.Conn(); conn != nil {
		return relay.SocketStdout(conn)
	}
	return h.Output.Stdout()
}

// Pid is 0: the relay's pid inside the container is not known outside;
// its Tag names it instead (enclosure.Describe).
func (h *handle) Pid() int { return 0 }

var _ enclosure.Tagged = (*handle)(nil)

// Tag is the relay's tag, which names the process in lsp status.
func (h *handle) Tag() string { return h.tag }

func (h *handle) Stdin() io.WriteCloser { return h.stdin }

// signalTimeout bounds the exec that carries a signal.
const signalTimeout = 10 * time.Second

// Signal has the relay pass sig to the process group (the exec API has
// no signal of its own): SIGINT only interrupts; SIGTERM, SIGHUP and
// SIGQUIT are followed by SIGKILL after the relay's grace. Those three go
// in the relay's stdin, which spares an exec through the API server;
// SIGINT and any other go by an exec of "relay signal".
func (h *handle) Signal(sig os.Signal) error {
	s, err := enclosure.CheckSignal(sig, h.Done())
	if err != nil {
		return err
	}
	h.signalled.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), signalTimeout)
	defer cancel()
	return relay.SendSignal(ctx, h.frames, h.p.run, h.p.relay, h.tag, s, h.p.String())
}

// exitWait bounds the wait, once Kill closed stdin, for the stream to end
// with the relay: its grace and its SIGKILL, with room. Past it the
// stream is dropped (the API server or the pod does not answer).
const exitWait = 30 * time.Second

// Kill ends the process and everything it started: the relay sends the
// group SIGTERM, then SIGKILL after its grace. Stdin's end (the relay
// reads EOF: over WebSocket a close message, over SPDY the stream's
// half-close) ends the run as well should the signal not arrive; the
// stream then ends with the relay, so Done closes once the process has
// exited, or after exitWait at most.
func (h *handle) Kill() error {
	h.killOnce.Do(func() {
		select {
		case <-h.Done():
			return
		default:
		}
		h.killed.Store(true)
		_ = h.Signal(syscall.SIGTERM)
		_ = h.stdinW.Close()
		// The timer goes once the stream ends, so an exec that ends in
		// time leaves nothing behind for exitWait.
		t := time.AfterFunc(exitWait, h.cancel)
		context.AfterFunc(h.streamed, func() { t.Stop() })
	})
	return nil
}

func (h *handle) wait(ctx context.Context, argv []string, stdin io.Reader) {
	defer h.cancel()
	stdout, stderr := h.Writers()
	if h.socket != nil {
		stdout = io.Discard // the relay writes nothing there; the program has the socket
	}
	protocol, err := h.p.stream(ctx, argv, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
	h.protocol = protocol
	h.cancel() // streamed is done: a start waiting for its socket learns the relay ended
	// Writes to stdin now fail rather than wait for a reader, and the
	// client's copy of stdin ends.
	_ = h.stdinW.Close()
	if h.socket == nil {
		h.CloseWrite()
	}
	var waitErr error
	code, ok := exitCode(err)
	switch {
	case !ok && h.killed.Load():
		code = -1
	case !ok:
		code, waitErr = -1, h.p.failed(context.Background(), "the process's stream", err)
	case h.killed.Load() && code > 128:
		code = -1 // the relay reports death by signal N as 128+N
	default:
		// Killed by a signal Berth did not send: a pod that was deleted,
		// or whose container stopped, says so, rather than leave the
		// caller an exit status it cannot explain.
		if code > 128 && !h.signalled.Load() {
			if gerr := h.p.gone(context.Background()); gerr != nil {
				code, waitErr = -1, gerr
			}
		}
	}
	if h.socket != nil {
		h.socket.End(!ok)
		h.CloseWrite()
	}
	h.End(code, waitErr)
}
