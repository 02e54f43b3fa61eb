package debug

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"time"

	"github.com/google/go-dap"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

// adapterLink is a session's adapter process (none for attach, where the
// debuggee's own adapter listens on a port) and its DAP client: it starts
// the adapter in the enclosure and connects to it, sends requests bounded
// by the request wait, says why its stream ended, and ends it. The enclosure's process handle has its own owner
// goroutine, and the adapter's stderr is drained into a capped buffer
// (cmd.Stderr) that explains a failed start.
type adapterLink struct {
	// enc is the run's enclosure, asked when the adapter's stream ends
	// unexpectedly; nil in unit tests that build a session alone.
	enc    enclosure.Enclosure
	driver string            // the enclosure's, for metrics
	wait   time.Duration     // debug.request_wait, bounding each request
	proc   enclosure.Process // nil for attach
	conn   net.Conn          // nil for stdio
	stderr *capped
	c      *client // nil until connected
	// removeAfter is a host file the adapter built (delve's binary),
	// removed when the session ends, whether or not the adapter did.
	removeAfter string
}

// start starts the adapter a (its executable exe, in dir) in the
// enclosure and connects to it: over its stdio, or (tcp) on the port it
// prints within the request wait, through the enclosure's Dial. onEvent
// is the client's.
func (l *adapterLink) start(ctx context.Context, a *Adapter, exe, dir string, onEvent func(dap.EventMessage)) error {
	cmd := enclosure.Cmd{Path: exe, Args: a.Args, Dir: dir, Stderr: l.stderr}
	if a.Transport == "stdio" {
		// A stopped program is work a restart of Berth must not lose:
		// the relay holds the adapter (and its debuggee) for a Berth
		// that comes back. One over TCP ends with Berth's connection.
		cmd.Keep = &enclosure.Keep{Kind: metrics.KindDebug, Role: a.ID}
	}
	proc, err := l.enc.Start(ctx, cmd)
	if err != nil {
		return fmt.Errorf("starting %s: %w", a.ID, err)
	}
	l.proc = proc
	if a.Transport != "tcp" {
		l.connect(proc.Stdout(), proc.Stdin(), onEvent)
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, l.wait)
	defer cancel()
	port, err := listenPort(wctx, proc, l.stderr)
	if err != nil {
		return err
	}
	conn, err := l.enc.Dial(wctx, port)
	if err != nil {
		return fmt.Errorf("connecting to %s on port %d: %w", a.ID, port, err)
	}
	l.attach(conn, onEvent)
	return nil
}

// attach connects to an adapter through conn, which the link then owns.
func (l *adapterLink) attach(conn net.Conn, onEvent func(dap.EventMessage)) {
	l.conn = conn
	l.connect(conn, conn, onEvent)
}

// connect starts the DAP client on the stream.
func (l *adapterLink) connect(r io.Reader, w io.Writer, onEvent func(dap.EventMessage)) {
	l.c = newClient(r, w, onEvent)
}

// resume starts the DAP client on the stdio of an adapter a Berth before
// this one started (proc, taken back after a restart): its stream is
// read from the next message's header on (the Berth before may have
// read part of one), and its requests are numbered from resumedSeq, so
// that an answer to one of the Berth before's, still on its way, never
// answers one of this Berth's.
func (l *adapterLink) resume(proc enclosure.Process, onEvent func(dap.EventMessage)) {
	l.proc = proc
	if r := proc.Stderr(); r != nil {
		go func() { _, _ = io.Copy(l.stderr, r) }()
	}
	l.c = newClientFrom(&resyncReader{r: bufio.NewReader(proc.Stdout())}, proc.Stdin(), onEvent, resumedSeq)
}

// resumedSeq is the first sequence number of a resumed session's
// requests: past any a session could have sent before Berth restarted.
const resumedSeq = 1 << 30

// resyncReader is an adapter's stream read from the first message header
// on: what comes before it is the rest of a message a Berth that went
// away had begun to read.
type resyncReader struct {
	r      *bufio.Reader
	synced bool
}

// dapHeader starts every message's header.
const dapHeader = "Content-Length:"

func (x *resyncReader) Read(p []byte) (int, error) {
	for skipped := 0; !x.synced; skipped++ {
		head, err := x.r.Peek(len(dapHeader))
		if err != nil {
			return 0, err
		}
		if string(head) == dapHeader {
			x.synced = true
			break
		}
		if skipped > maxMessage {
			return 0, fmt.Errorf("the adapter's stream holds no message header in its first %d bytes after Berth restarted", maxMessage)
		}
		_, _ = x.r.Discard(1)
	}
	return x.r.Read(p)
}

// stopped says why the adapter's stream ended before the program did:
// when its container stopped, went away, is paused, or its engine does
// not answer, that (naming the container and what to do), not only "the
// adapter closed its connection" (issue 24 item 11).
func (l *adapterLink) stopped() string {
	why := "the adapter stopped: " + errString(l.c.Err())
	if l.enc == nil || l.driver == "host" {
		return why // the host does not stop under its processes
	}
	if l.proc != nil {
		// A container's handle learns why its process ended (its
		// container stopped) once the engine says so.
		t := time.NewTimer(adapterExitWait)
		select {
		case <-l.proc.Done():
			if _, err := l.proc.Wait(); enclosure.Down(err) {
				t.Stop()
				return "the adapter stopped with its container: " + enclosure.Say(err)
			}
		case <-t.C:
		}
	}
	if err := enclosure.Check(context.Background(), l.enc); err != nil {
		return "the adapter stopped with its container: " + enclosure.Say(err)
	}
	return why
}

// request sends one request and waits up to debug.request_wait for its
// answer.
func (l *adapterLink) request(ctx context.Context, req dap.RequestMessage) (dap.Message, error) {
	rctx, cancel := context.WithTimeout(ctx, l.wait)
	defer cancel()
	return l.c.call(rctx, req)
}

// exchange is request with the answer typed as T, the response its
// command has.
func exchange[T dap.ResponseMessage](ctx context.Context, l *adapterLink, req dap.RequestMessage) (T, error) {
	resp, err := l.request(ctx, req)
	if err != nil {
		var zero T
		return zero, err
	}
	return as[T](req.GetRequest().Command, resp)
}

// as is a response as the type its request's command answers with. go-dap
// types a response by the command the adapter wrote in it, so an adapter
// that answers under another command gets an error here, not a panic.
func as[T dap.ResponseMessage](command string, m dap.Message) (T, error) {
	r, ok := m.(T)
	if !ok {
		return r, fmt.Errorf("the adapter answered %s with an unexpected message (%T): call status, or terminate and launch again", command, m)
	}
	return r, nil
}

// threadList lists the program's threads.
func (l *adapterLink) threadList(ctx context.Context) ([]dap.Thread, error) {
	resp, err := exchange[*dap.ThreadsResponse](ctx, l, &dap.ThreadsRequest{Request: dap.Request{Command: "threads"}})
	if err != nil {
		return nil, err
	}
	return resp.Body.Threads, nil
}

// frames lists up to levels frames of a thread, and how many it has.
func (l *adapterLink) frames(ctx context.Context, threadID, levels int) ([]dap.StackFrame, int, error) {
	resp, err := exchange[*dap.StackTraceResponse](ctx, l, &dap.StackTraceRequest{Request: dap.Request{Command: "stackTrace"},
		Arguments: dap.StackTraceArguments{ThreadId: threadID, Levels: levels}})
	if err != nil {
		return nil, 0, err
	}
	body := resp.Body
	return body.StackFrames, body.TotalFrames, nil
}

// adapterExitWait bounds the wait for an adapter's process to be known
// ended once its stream ended.
const adapterExitWait = 3 * time.Second

// close ends the link: a polite disconnect (terminating the debuggee when
// terminate is set), the adapter's process group killed, the stream
// closed, the reader waited for (bounded) and the built binary removed.
func (l *adapterLink) close(terminate bool) {
	disconnect := func() {
		if l.c == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, _ = l.c.call(ctx, &dap.DisconnectRequest{
			Request:   dap.Request{Command: "disconnect"},
			Arguments: &dap.DisconnectArguments{TerminateDebuggee: terminate},
		})
		cancel()
	}
	if l.proc != nil {
		// No grace after the answer: an adapter exits only when its
		// stream closes, so waiting would only delay the end.
		enclosure.StopFunc(l.proc, disconnect, 0)
	} else {
		disconnect()
	}
	if l.conn != nil {
		_ = l.conn.Close()
	}
	// The adapter's end (or the closed connection) ends the reader; the
	// wait is bounded all the same, so a stream something else holds
	// open never hangs the caller.
	if l.c != nil {
		select {
		case <-l.c.Done():
		case <-time.After(5 * time.Second):
		}
	}
	if l.removeAfter != "" {
		_ = os.Remove(l.removeAfter)
	}
}

// listenAt finds the port in "DAP server listening at: 127.0.0.1:PORT".
var listenAt = regexp.MustCompile(`listening at:?\s*\S*:(\d+)`)

// maxListenLine bounds the line kept to look for the port in.
const maxListenLine = 4 << 10

// listenPort reads the adapter's stdout until it names its port, then
// keeps draining stdout into rest (so the adapter never blocks on a full
// pipe) until the process closes it.
func listenPort(ctx context.Context, proc enclosure.Process, rest io.Writer) (int, error) {
	found := make(chan int, 1)
	go func() {
		r := bufio.NewReader(proc.Stdout())
		sent := false
		for {
			// A line is kept only while it may name the port; a longer
			// one goes on to rest as it comes, so an adapter that never
			// ends a line costs no memory (issue 24 item 1).
			var line []byte
			long := false
			var err error
			for {
				var chunk []byte
				chunk, err = r.ReadSlice('\n')
				if !long && len(line)+len(chunk) > maxListenLine {
					_, _ = rest.Write(line)
					line, long = nil, true
				}
				if long {
					_, _ = rest.Write(chunk)
				} else {
					line = append(line, chunk...)
				}
				if !errors.Is(err, bufio.ErrBufferFull) {
					break
				}
			}
			if !sent && !long {
				if m := listenAt.FindSubmatch(line); m != nil {
					if p, perr := strconv.Atoi(string(m[1])); perr == nil {
						found <- p
						sent = true
						continue
					}
				}
			}
			if !long {
				_, _ = rest.Write(line)
			}
			if err != nil {
				if !sent {
					close(found)
				}
				return
			}
		}
	}()
	select {
	case p, ok := <-found:
		if !ok {
			return 0, fmt.Errorf("the adapter exited before it listened")
		}
		return p, nil
	case <-ctx.Done():
		return 0, fmt.Errorf("the adapter did not say which port it listens on: %w", ErrTimeout)
	}
}
