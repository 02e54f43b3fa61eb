package lsp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/internal/boundedio"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

// process is a language server's process in the run's enclosure and its
// JSON-RPC connection: it sends requests (with the request timeout and
// the retries the server asks for), tells a crash or a refused stream
// from an answer, and ends the server. Its connection's read goroutine
// runs the client callbacks.
type process struct {
	name    string        // the entry's name, for messages and metrics
	timeout time.Duration // lsp.request_timeout
	// maxMessage is lsp.max_message_bytes, the largest message read.
	maxMessage int64
	metrics    *metrics.Metrics // nil in tests that build a server by hand
	handle     enclosure.Process
	// stdout is the server's stdout as the connection reads it: its
	// header lines and declared lengths are checked against limits before
	// jsonrpc2 buffers them (issue 24 items 1 and 2).
	stdout *boundedio.Framed
	// inflight counts the requests being sent to it (call), so that a
	// reload lets them finish before it closes the server.
	inflight   atomic.Int32
	conn       jsonrpc2.Conn
	api        protocol.Server
	stderr     *ring
	started    time.Time
	exited     chan struct{} // closed when the process has exited
	crashNoted bool          // the supervisor counted its crash; guarded by the supervisor's mu

	mu      sync.Mutex // guards closing and closedLive
	closing bool
	// closedLive: it was still alive when close began, so a request it
	// failed was cut off by the close, not by a crash (loss).
	closedLive bool
}

// stdio joins a process's stdout and stdin into the stream the connection
// reads and writes.
type stdio struct {
	io.Reader
	io.WriteCloser
}

// newProcess is the process of the entry name, before it starts.
func newProcess(name string, conf Config, mt *metrics.Metrics) *process {
	return &process{name: name, timeout: conf.RequestTimeout, maxMessage: conf.MaxMessageBytes, metrics: mt,
		stderr: newRing(conf.StderrBytes), exited: make(chan struct{})}
}

// start starts cmd in encl, its stderr kept in the ring, and opens the
// connection over its stdio, with client answering what the server asks.
// ctx bounds the start; the process lives until close or kill.
func (p *process) start(ctx context.Context, encl enclosure.Enclosure, cmd enclosure.Cmd, client protocol.Client) error {
	cmd.Stderr = p.stderr
	var err error
	p.handle, err = encl.Start(ctx, cmd)
	if err != nil {
		return err
	}
	p.open(p.handle.Stdout(), client, nil)
	return nil
}

// open opens the connection over the process's stdio, stdout read from
// out, with client answering what the server asks; wrap, when set, wraps
// the stream.
func (p *process) open(out io.Reader, client protocol.Client, wrap func(jsonrpc2.Stream) jsonrpc2.Stream) {
	p.started = time.Now()
	go func() {
		<-p.handle.Done()
		close(p.exited)
	}()
	p.stdout = boundedio.NewFramed(out, boundedio.Limits{Body: p.maxMessage})
	stream := jsonrpc2.NewHeaderStream(stdio{p.stdout, p.handle.Stdin()})
	if wrap != nil {
		stream = wrap(stream)
	}
	p.conn, p.api = Connect(client, stream)
}

// Connect is protocol.NewClient with the server's messages handled in
// the order they come, each handler done before the next message is
// read. NewClient makes every handler asynchronous (protocol.Handlers),
// so a publish of diagnostics could be recorded after the answer to a
// request the server sent it before: gopls answers gopls.diagnose_files
// after publishing what it found, and that answer is what Berth waits
// for. Berth's client methods never block and never call the server,
// so running them in turn holds nothing up, and none needs cancelling
// (no CancelHandler). They get a context of their own, not the
// request's: the connection recycles a request once its handler has
// returned, and a context derived from it (context.WithCancel, as
// CancelHandler makes) is read by a goroutine after that. The
// benchmarks' direct clients (bench/internal/lspdirect) connect with it
// too, so that they handle a server's messages as Berth does.
func Connect(client protocol.Client, stream jsonrpc2.Stream) (jsonrpc2.Conn, protocol.Server) {
	conn := jsonrpc2.NewConn(stream, jsonrpc2.WithCodec(lspCodec{}))
	ctx := protocol.WithClient(context.Background(), client)
	handle := protocol.ClientHandler(client, jsonrpc2.MethodNotFoundHandler)
	conn.Go(ctx, func(_ context.Context, req *jsonrpc2.Request) (any, error) {
		return handle(ctx, req)
	})
	return conn, protocol.ServerDispatcher(conn)
}

// lspCodec is the codec protocol.NewClient installs, which the protocol
// package does not export: its own Marshal and Unmarshal, which know
// LSP's union types, and raw messages as they are.
type lspCodec struct{}

func (lspCodec) Marshal(v any) ([]byte, error) {
	switch m := v.(type) {
	case jsonrpc2.RawMessage:
		if m == nil {
			return []byte("null"), nil
		}
		return m, nil
	case *jsonrpc2.RawMessage:
		if m == nil || *m == nil {
			return []byte("null"), nil
		}
		return *m, nil
	}
	return protocol.Marshal(v)
}

func (lspCodec) Unmarshal(data []byte, v any) error {
	if p, ok := v.(*jsonrpc2.RawMessage); ok {
		*p = append(jsonrpc2.RawMessage(nil), data...)
		return nil
	}
	return protocol.Unmarshal(data, v)
}

// exitError says how the process ended before it answered initialize.
func (p *process) exitError() error {
	select {
	case <-p.exited:
		code, _ := p.handle.Wait()
		return fmt.Errorf("it exited with code %d before answering initialize", code)
	case <-time.After(time.Second): // its output closed; the exit may lag
		return errors.New("it closed its output before answering initialize")
	}
}

// alive says whether the server can still answer: its process runs and
// its connection is open.
func (p *process) alive() bool {
	select {
	case <-p.exited:
		return false
	case <-p.conn.Done():
		return false
	default:
		return true
	}
}

// waitGone waits up to d for the process to exit or the connection to
// end, and says whether it did.
func (p *process) waitGone(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-p.conn.Done():
	case <-t.C:
		return false
	}
	return true
}

// call runs one request with the request timeout, retrying when the
// server answers that the content changed under it or that it cancelled
// the request itself.
func (p *process) call(ctx context.Context, method string, f func(ctx context.Context) error) error {
	p.inflight.Add(1)
	defer p.inflight.Add(-1)
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, p.timeout)
		start := time.Now()
		err := f(cctx)
		if p.metrics != nil {
			p.metrics.LSPRequestDuration.WithLabelValues(p.name, method).Observe(time.Since(start).Seconds())
		}
		cancel()
		if err == nil || attempt == 4 || !retryable(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
		case <-ctx.Done():
			return err
		}
	}
}

// request runs f through call; when the server died under it, the error
// wraps errExited and says that the next call gets a restarted server.
func (p *process) request(ctx context.Context, method string, f func(ctx context.Context) error) error {
	err := p.call(ctx, method, f)
	var answered *jsonrpc2.Error
	if err == nil || ctx.Err() != nil || errors.As(err, &answered) {
		return err
	}
	if refused := p.refusal(); refused != nil {
		return refused
	}
	return p.markExited(err)
}

// refusal says why Berth stopped reading the server, when what it sent
// broke a limit (a header line or block without end, a message over
// lsp.max_message_bytes): its connection has ended and the server is
// killed with it. The error names the server, what it sent and what to
// do. nil while its stream is within the limits.
func (p *process) refusal() error {
	err := p.stdout.Err()
	if err == nil {
		return nil
	}
	next := "a language server's header is a line or two: if it does this again, it is broken, or something other than the server writes to its stdout (check its command in lsp.servers)"
	if errors.Is(err, boundedio.ErrBody) {
		next = "if its answers really are this large, raise lsp.max_message_bytes"
	}
	return fmt.Errorf("%s sent %v, so Berth stopped reading it and ended it; it is restarted on the next call; %s", p.name, err, next)
}

// markExited wraps a transport error in errExited when the server's process
// is gone (its exit lags the EOF by a moment), and in errReplaced too when
// Berth closed it on purpose (a reload, the run's end); other errors pass
// as they are.
func (p *process) markExited(err error) error {
	if !p.waitGone(time.Second) {
		return err
	}
	lost := p.loss()
	return fmt.Errorf("%w; %s %w; %s", err, p.name, lost.err(), lost.advice())
}

// loss says how a request lost this server, which is gone: replaced when
// Berth closed it on purpose (close) while it was alive, else crashed
// (a server that died first and was closed after is a crash).
func (p *process) loss() loss {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing && p.closedLive {
		return replaced
	}
	return crashed
}

// close ends the server: shutdown and exit when it still answers, then,
// after the grace, a kill of its process group (enclosure.StopFunc).
func (p *process) close() {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		return
	}
	p.closing = true
	p.closedLive = p.alive()
	p.mu.Unlock()
	grace := time.Duration(0) // a server that does not answer is killed at once
	if p.alive() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if p.api.Shutdown(ctx) == nil && p.api.Exit(ctx) == nil {
			grace = closeGrace
		}
		cancel()
	}
	enclosure.StopFunc(p.handle, nil, grace)
	<-p.exited
	_ = p.conn.Close()
}

// drain waits, up to d, until no request is being sent to the server: a
// reload closes the old server only then, so that a query already on
// its way is answered rather than cut off.
func (p *process) drain(d time.Duration) {
	deadline := time.Now().Add(d)
	for p.inflight.Load() > 0 && time.Now().Before(deadline) && p.alive() {
		time.Sleep(5 * time.Millisecond)
	}
}

// kill kills the process and waits for the connection to end.
func (p *process) kill() {
	_ = p.handle.Kill()
	<-p.exited
	_ = p.conn.Close()
}

// isClosing says whether the server is being closed on purpose.
func (p *process) isClosing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closing
}

// closeGrace is how long a server that was told to exit has to do so
// before it is killed.
const closeGrace = time.Second

// advice says what to do after a request failed: a refusal by the server
// usually means the position names no symbol it knows; a crash or a
// timeout already says what to do.
func advice(err error) string {
	var answered *jsonrpc2.Error
	if errors.As(err, &answered) {
		return " (check that line and symbol name the identifier you mean; lsp status shows the server's state)"
	}
	return ""
}

// errExited marks a request whose server exited under it. Read-only
// queries are asked once more of the restarted server (see retried).
var errExited = errors.New("exited during the request")

// errReplaced marks a request whose server Berth closed on purpose under
// it (a reload by another call, the run's end): it wraps errExited, with
// the same words (loss.advice says the rest). Read-only queries follow it
// to its replacement (see retried).
var errReplaced = fmt.Errorf("%w", errExited)

// retryable says whether the server asked for the request to be sent
// again: ContentModified or ServerCancelled.
func retryable(err error) bool {
	var e *jsonrpc2.Error
	if !errors.As(err, &e) {
		return false
	}
	return e.Code == protocol.CodeContentModified || e.Code == codeServerCancelled
}

// codeServerCancelled is LSP's ServerCancelled (-32802): the server gave
// up on the request and the client may retry it.
const codeServerCancelled jsonrpc2.Code = -32802
