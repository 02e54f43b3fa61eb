package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/berth-dev/berth/orchestrator"
)

// ErrClosed is returned by calls on a connection that has closed.
var ErrClosed = errors.New("connection closed")

// Request is an inbound request or notification.
type Request struct {
	Method string
	Params json.RawMessage // an object, an array, or nil
	// Notification is true when the sender expects no reply.
	Notification bool
}

// Handler answers inbound requests. A returned *Error is sent as it is;
// any other error becomes an internal error (-32603) with its message.
// ctx ends when the peer cancels the request ($/cancelRequest) or the
// connection closes. Requests are handled concurrently.
type Handler interface {
	Handle(ctx context.Context, req *Request) (any, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req *Request) (any, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, req *Request) (any, error) { return f(ctx, req) }

// ConnOptions configure a connection.
type ConnOptions struct {
	// Handler answers the peer's requests; nil answers every method with
	// "method not found".
	Handler Handler
	// OnReject, when set, hears each rejected inbound message's reason:
	// "parse", "invalid" or "too_large".
	OnReject func(reason string)
	Log      *slog.Logger
}

// Conn is one JSON-RPC 2.0 connection, both directions at once.
//
// One goroutine at a time reads messages: responses go to the Call
// waiting for them; a request is handled by the goroutine that read it,
// once it has passed the reading on (reader). When the read loop
// ends (the peer went away, or Close), waiting Calls fail with ErrClosed,
// handler contexts are cancelled, and Done is closed once every handler
// has returned.
type Conn struct {
	framer Framer
	opts   ConnOptions

	ctx    context.Context // cancelled when the read loop ends
	cancel context.CancelFunc

	mu       sync.Mutex
	seq      int64
	pending  map[string]chan *message      // our calls waiting for a reply
	inflight map[string]context.CancelFunc // the peer's requests being handled
	closed   bool
	readErr  error

	readDone chan struct{}  // the read loop has ended
	handlers sync.WaitGroup // the reading and handling goroutines (reader)
	turn     chan struct{}  // passes the reading to an idle goroutine
	idle     atomic.Int32   // goroutines waiting for their turn
	done     chan struct{}  // every handler has returned too
}

// NewConn starts a connection over f.
func NewConn(f Framer, opts ConnOptions) *Conn {
	c := newConn(f, opts)
	c.start()
	return c
}

// newConn builds a connection without reading yet, so the caller can
// finish wiring what its handler needs before the first request arrives.
func newConn(f Framer, opts ConnOptions) *Conn {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Conn{
		framer: f, opts: opts, ctx: ctx, cancel: cancel,
		pending: map[string]chan *message{}, inflight: map[string]context.CancelFunc{},
		readDone: make(chan struct{}), done: make(chan struct{}), turn: make(chan struct{}),
	}
	return c
}

func (c *Conn) start() {
	c.handlers.Add(1)
	go c.reader()
}

// Done is closed when the connection has ended and its handlers returned.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err says why the read loop ended (nil for a clean end of stream or Close).
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readErr
}

// Close closes the connection and waits for its handlers to return.
func (c *Conn) Close() error {
	c.mu.Lock()
	already := c.closed
	c.closed = true
	c.mu.Unlock()
	var err error
	if !already {
		c.cancel()
		err = c.framer.Close()
	}
	<-c.done
	return err
}

// abort starts closing the connection without waiting for it: for
// shutdown, where a stdio read may never return.
func (c *Conn) abort() {
	c.mu.Lock()
	already := c.closed
	c.closed = true
	c.mu.Unlock()
	if !already {
		c.cancel()
		_ = c.framer.Close()
	}
}

// Call sends a request and decodes its result into result (which may be
// nil). An error reply is returned as an *Error. If ctx ends first, the
// peer is sent $/cancelRequest and ctx's error is returned.
func (c *Conn) Call(ctx context.Context, method string, params, result any) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.seq++
	id := json.RawMessage(fmt.Sprint(c.seq))
	key := idKey(id)
	ch := make(chan *message, 1)
	c.pending[key] = ch
	c.mu.Unlock()
	drop := func() {
		c.mu.Lock()
		delete(c.pending, key)
		c.mu.Unlock()
	}

	p, err := encodeParams(params)
	if err != nil {
		drop()
		return fmt.Errorf("%s: encoding params: %w", method, err)
	}
	if err := c.writeBytes(ctx, requestBytes(id, method, p)); err != nil {
		drop()
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m := <-ch:
		err := m.into(result)
		if err != nil && m.unchecked {
			// Not the shape it looked like (a member after the result):
			// read the whole message the thorough way.
			if d := decode(m.body); d.err == nil && d.isResponse() {
				err = d.msg.into(result)
			}
		}
		var e *Error
		if err != nil && !errors.As(err, &e) {
			return fmt.Errorf("%s: %w", method, err)
		}
		return err
	case <-ctx.Done():
		drop()
		// The peer may still be working on it: tell it to stop. Best
		// effort, on a fresh context since ctx is over.
		_ = c.Notify(context.Background(), "$/cancelRequest", map[string]json.RawMessage{"id": id})
		return ctx.Err()
	case <-c.readDone:
		drop()
		return fmt.Errorf("%s: %w", method, ErrClosed)
	}
}

// into returns the response's error, or decodes its result into result
// (which may be nil).
func (m *message) into(result any) error {
	if m.Error != nil {
		return m.Error
	}
	if r, ok := result.(*orchestrator.Result); ok && r != nil {
		if v, ok := readResult(m.Result); ok {
			*r = v
			return nil
		}
	}
	if result == nil || len(m.Result) == 0 {
		if m.unchecked && !json.Valid(m.Result) {
			return errors.New("the result is not valid JSON")
		}
		return nil
	}
	if err := json.Unmarshal(m.Result, result); err != nil {
		return fmt.Errorf("decoding result: %w", err)
	}
	return nil
}

// Notify sends a notification.
func (c *Conn) Notify(ctx context.Context, method string, params any) error {
	p, err := encodeParams(params)
	if err != nil {
		return fmt.Errorf("%s: encoding params: %w", method, err)
	}
	return c.writeBytes(ctx, requestBytes(nil, method, p))
}

// encodeParams marshals params; nil is left out of the message, since
// JSON-RPC allows params only as an object or an array.
func encodeParams(params any) (json.RawMessage, error) {
	if params == nil {
		return nil, nil
	}
	if p, ok := params.(CallToolParams); ok {
		return p.encode()
	}
	p, err := json.Marshal(params)
	if err != nil || string(p) == "null" {
		return nil, err
	}
	return p, nil
}

func (c *Conn) write(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.writeBytes(ctx, b)
}

func (c *Conn) writeBytes(ctx context.Context, b []byte) error {
	select {
	case <-c.readDone:
		return ErrClosed
	default:
	}
	return c.framer.Write(ctx, b)
}

func (c *Conn) reply(id json.RawMessage, result any, e *Error) {
	if id == nil {
		id = nullID
	}
	r := response{JSONRPC: "2.0", ID: id, Error: e}
	if res, ok := result.(*orchestrator.Result); ok && e == nil {
		r.Result = appendResult(make([]byte, 0, resultSize(res)), res)
	} else if e == nil {
		b, err := json.Marshal(result)
		if err != nil {
			r.Error = Errorf(CodeInternalError, "internal error: encoding the result: %v", err)
		} else {
			r.Result = b
		}
	}
	if l, ok := c.framer.(limited); ok && r.Error == nil && int64(len(r.Result)) > l.maxSize() {
		// The peer would skip the reply and wait for it forever: answer
		// with an error it can act on instead.
		r.Result, r.Error = nil, Errorf(CodeInternalError,
			"internal error: the result of %d bytes exceeds the message limit of %d bytes (rpc.max_message_bytes) and was not sent; ask for less output, or raise the limit on both ends", len(r.Result), l.maxSize())
	}
	var err error
	if r.Error == nil {
		err = c.writeBytes(c.ctx, resultBytes(r.ID, r.Result))
	} else {
		err = c.write(c.ctx, r)
	}
	if err != nil && !errors.Is(err, ErrClosed) {
		c.opts.Log.Debug("rpc: reply not written", "err", err)
	}
}

func (c *Conn) reject(reason string, id json.RawMessage, e *Error) {
	if c.opts.OnReject != nil {
		c.opts.OnReject(reason)
	}
	c.reply(id, nil, e)
}

// reader reads messages until one needs a handler; it then passes the
// reading on to another goroutine and runs the handler itself. The
// request so runs at once on the goroutine that read it, its stack grown
// by earlier requests, and the next read waits on the other goroutine,
// off the request's path; handing each request to a second goroutine
// instead costs a wake-up per call (tens of microseconds on a small
// machine). After its handler a goroutine waits, as one of a few idle
// ones, for its next turn to read. Every such goroutine is counted in
// handlers, so Done waits for all of them.
func (c *Conn) reader() {
	defer c.handlers.Done()
	for {
		task, ok := c.readUntilTask()
		if !ok {
			return
		}
		c.passReading()
		task()
		if !c.waitTurn() {
			return
		}
	}
}

// readUntilTask reads and handles messages that need no handler
// (responses, cancellations, refusals) until one does, and returns its
// task; false when the connection has ended.
func (c *Conn) readUntilTask() (func(), bool) {
	for {
		body, err := c.framer.Read(c.ctx)
		if err != nil {
			var fe *FrameError
			if errors.As(err, &fe) {
				c.reject(fe.Reason, nil, fe.Err)
				continue
			}
			c.mu.Lock()
			if !c.closed {
				c.readErr = err
			}
			c.mu.Unlock()
			c.shutdown()
			return nil, false
		}
		d, ok := quickResponse(body)
		if !ok {
			d, ok = quickRequest(body)
		}
		if !ok {
			d = decode(body)
		}
		switch {
		case d.err != nil:
			reason := "invalid"
			if d.err.Code == CodeParseError {
				reason = "parse"
			}
			c.reject(reason, d.msg.ID, d.err)
			if r, ok := c.framer.(rereader); ok && d.err.Code == CodeParseError {
				// Answered once; the next message may start inside it.
				r.reread(body)
			}
		case d.isResponse():
			c.mu.Lock()
			ch, ok := c.pending[idKey(d.msg.ID)]
			delete(c.pending, idKey(d.msg.ID))
			c.mu.Unlock()
			if ok {
				ch <- &d.msg
			} else {
				c.opts.Log.Debug("rpc: response to no pending call", "id", string(d.msg.ID))
			}
		case d.msg.Method == "$/cancelRequest":
			c.cancelInflight(d)
		default:
			if task := c.prepare(d); task != nil {
				return task, true
			}
		}
	}
}

// maxIdleWorkers bounds the goroutines a connection keeps waiting for
// their turn to read.
const maxIdleWorkers = 4

// passReading gives the next read to an idle goroutine, or to a new one.
func (c *Conn) passReading() {
	select {
	case c.turn <- struct{}{}:
	default:
		c.handlers.Add(1)
		go c.reader()
	}
}

// waitTurn waits to be passed the reading; false when the goroutine
// should end instead (enough are idle, or the connection ended).
func (c *Conn) waitTurn() bool {
	if c.idle.Add(1) > maxIdleWorkers {
		c.idle.Add(-1)
		return false
	}
	defer c.idle.Add(-1)
	select {
	case <-c.turn:
		return true
	case <-c.readDone:
		return false
	}
}

func (c *Conn) cancelInflight(d decoded) {
	var p struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(d.msg.Params, &p); err != nil || !validID(p.ID) {
		if d.hasID {
			c.reject("invalid", d.msg.ID, Errorf(CodeInvalidParams, "invalid params for $/cancelRequest: field \"id\" must be the string or integer id of a request in flight"))
		}
		return
	}
	c.mu.Lock()
	cancel := c.inflight[idKey(p.ID)]
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if d.hasID {
		c.reply(d.msg.ID, nil, nil)
	}
}

// prepare registers a request as in flight (before the next message is
// read, so a $/cancelRequest right behind it finds it) and returns the
// task that handles and answers it; nil when it was refused.
func (c *Conn) prepare(d decoded) func() {
	ctx, cancel := context.WithCancel(c.ctx)
	req := &Request{Method: d.msg.Method, Params: d.msg.Params, Notification: !d.hasID}
	var key string
	if d.hasID {
		key = idKey(d.msg.ID)
		c.mu.Lock()
		_, dup := c.inflight[key]
		if !dup {
			c.inflight[key] = cancel
		}
		c.mu.Unlock()
		if dup {
			cancel()
			c.reject("invalid", d.msg.ID, Errorf(CodeInvalidRequest, "invalid request: id %s is already used by a request in flight; use a fresh id per request", d.msg.ID))
			return nil
		}
	}
	return func() {
		defer cancel()
		result, err := c.handle(ctx, req)
		if !d.hasID {
			return
		}
		c.mu.Lock()
		delete(c.inflight, key)
		c.mu.Unlock()
		if err == nil {
			c.reply(d.msg.ID, result, nil)
			return
		}
		var e *Error
		switch {
		case errors.As(err, &e):
		case ctx.Err() != nil && c.ctx.Err() == nil:
			e = Errorf(CodeRequestCancelled, "request cancelled: %v", err)
		default:
			e = Errorf(CodeInternalError, "internal error: %v", err)
		}
		c.reply(d.msg.ID, nil, e)
	}
}

// handle runs the handler under a panic guard.
func (c *Conn) handle(ctx context.Context, req *Request) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.opts.Log.Error("rpc: handler panicked", "method", req.Method, "panic", p, "stack", string(debug.Stack()))
			result, err = nil, Errorf(CodeInternalError, "internal error handling %s: %v", req.Method, p)
		}
	}()
	if c.opts.Handler == nil {
		return nil, Errorf(CodeMethodNotFound, "method not found: %s", req.Method)
	}
	return c.opts.Handler.Handle(ctx, req)
}

func (c *Conn) shutdown() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	close(c.readDone)
	c.cancel()
	go func() {
		c.handlers.Wait()
		_ = c.framer.Close()
		close(c.done)
	}()
}

// requestBytes and resultBytes assemble a message from parts that are
// already compact, valid JSON (our own json.Marshal output, or an id that
// decode checked). Marshalling a struct with json.RawMessage fields would
// scan and compact each part again: for a large result that second pass
// is a good part of what the protocol adds to a call.
func requestBytes(id json.RawMessage, method string, params json.RawMessage) []byte {
	m, _ := json.Marshal(method) // a string always marshals
	b := make([]byte, 0, len(id)+len(m)+len(params)+48)
	b = append(b, `{"jsonrpc":"2.0"`...)
	if id != nil {
		b = append(b, `,"id":`...)
		b = append(b, id...)
	}
	b = append(b, `,"method":`...)
	b = append(b, m...)
	if params != nil {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return append(b, '}')
}

func resultBytes(id, result json.RawMessage) []byte {
	b := make([]byte, 0, len(id)+len(result)+40)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	return append(b, '}')
}
