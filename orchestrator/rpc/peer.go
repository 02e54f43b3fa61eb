package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"go.lsp.dev/jsonrpc2"

	"github.com/berth-dev/berth/internal/errclass"
)

// handlerFunc answers one inbound request. A returned *Error is sent as it
// is; any other error becomes an internal error (-32603) with its message.
// ctx ends when the peer cancels the request ($/cancelRequest) or the
// connection ends. Requests are handled concurrently.
type handlerFunc func(ctx context.Context, req *jsonrpc2.Request) (any, error)

// peer is one connection, both directions at once: go.lsp.dev/jsonrpc2's
// Conn over Berth's wire, with what Berth promises beyond the library's
// dispatch. Each request runs concurrently (the library's Async) with a
// context that $/cancelRequest ends (the library's CancelHandler, reached
// from its Preempter, which reads the cancel before the next message), and
// is answered -32800 when it was; a panic is an internal error, not the
// end of the connection; a result over the message limit is not sent but
// answered -32603. A Call whose context ends sends $/cancelRequest, and
// every Call fails with ErrClosed once the connection is gone.
type peer struct {
	conn    jsonrpc2.Conn
	wire    *wire
	handler handlerFunc
	cancel  func(jsonrpc2.ID) // cancels the request in flight with that id
	limit   int64
	log     *slog.Logger

	// ctx is the parent of every handler's context: it ends when the
	// reading ends or the peer is aborted, so the work of a gone peer
	// stops.
	ctx   context.Context
	stop  context.CancelFunc
	ended chan struct{} // the reading has ended
}

// peerOptions configure a peer.
type peerOptions struct {
	// limit bounds a message either way (<= 0: DefaultMaxMessageSize).
	limit int64
	// onReject, when set, hears each refused inbound message's reason:
	// "parse", "invalid" or "too_large".
	onReject func(reason string)
	log      *slog.Logger
}

// codec encodes params and results with encoding/json, the package's one
// JSON API, and passes JSON that is already encoded on as it is, as the
// library's codecs do: a harness's answer reaches a kernel's tool()
// without a second encoding.
type codec struct{}

func (codec) Marshal(v any) ([]byte, error) {
	switch raw := v.(type) {
	case json.RawMessage:
		return raw, nil
	case jsonrpc2.RawMessage:
		return raw, nil
	}
	return json.Marshal(v)
}

func (codec) Unmarshal(data []byte, v any) error {
	switch raw := v.(type) {
	case *json.RawMessage:
		*raw = append(json.RawMessage(nil), data...)
		return nil
	case *jsonrpc2.RawMessage:
		*raw = append(jsonrpc2.RawMessage(nil), data...)
		return nil
	}
	return json.Unmarshal(data, v)
}

// newPeer builds a peer over f without reading yet, so the caller can
// finish wiring what its handler needs before the first request arrives.
func newPeer(f Framer, h handlerFunc, o peerOptions) *peer {
	if o.limit <= 0 {
		o.limit = DefaultMaxMessageSize
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	ctx, stop := context.WithCancel(context.Background())
	p := &peer{handler: h, limit: o.limit, log: o.log, ctx: ctx, stop: stop, ended: make(chan struct{})}
	p.wire = &wire{f: f, onReject: o.onReject, log: o.log, onEnd: func() {
		close(p.ended)
		stop()
	}}
	p.conn = jsonrpc2.NewConn(p.wire, jsonrpc2.WithCodec(codec{}), jsonrpc2.WithPreempter(p))
	return p
}

func (p *peer) start() {
	h, cancel := jsonrpc2.CancelHandler(p.dispatch)
	p.cancel = cancel
	p.conn.Go(p.ctx, h)
}

// Done is closed when the connection has ended and its handlers returned.
func (p *peer) Done() <-chan struct{} { return p.conn.Done() }

// Err says why the reading ended (nil for a clean end of stream or Close).
func (p *peer) Err() error { return p.conn.Err() }

// Close ends the connection and waits for its handlers to return.
func (p *peer) Close() error {
	p.abort()
	return p.conn.Close()
}

// abort starts ending the connection without waiting for it: for
// shutdown, where a stdio read may never return. Handlers' contexts end,
// and closing the wire ends the reading, which fails waiting Calls.
func (p *peer) abort() {
	p.stop()
	_ = p.wire.Close()
}

// Call sends a request and decodes its result into result (which may be
// nil). An error reply is returned as an *Error. If ctx ends first, the
// peer is sent $/cancelRequest and ctx's error is returned.
func (p *peer) Call(ctx context.Context, method string, params, result any) error {
	id, err := p.conn.Call(ctx, method, params, result)
	if err == nil {
		return nil
	}
	var e *jsonrpc2.Error
	switch {
	case errors.As(err, &e):
		return fromWire(e)
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		// The peer may still be working on it: tell it to stop. Best
		// effort, on a fresh context since ctx is over.
		if n, ok := id.Number(); ok {
			_ = p.Notify(context.Background(), "$/cancelRequest", struct {
				ID int64 `json:"id"`
			}{n})
		}
		return err
	case p.closed() || errors.Is(err, jsonrpc2.ErrClientClosing):
		return fmt.Errorf("%s: %w", method, ErrClosed)
	}
	return fmt.Errorf("%s: %w", method, err)
}

// Notify sends a notification.
func (p *peer) Notify(ctx context.Context, method string, params any) error {
	if err := p.conn.Notify(ctx, method, params); err != nil {
		if p.closed() || errors.Is(err, jsonrpc2.ErrClientClosing) {
			return fmt.Errorf("%s: %w", method, ErrClosed)
		}
		return fmt.Errorf("%s: %w", method, err)
	}
	return nil
}

// closed says the connection has ended or is ending.
func (p *peer) closed() bool {
	select {
	case <-p.ended:
		return true
	default:
		return p.ctx.Err() != nil
	}
}

// Preempt handles $/cancelRequest on the library's read loop, in the order
// it came, so a cancel right behind its request finds it in flight; every
// other request goes on to dispatch. An id that names no request in flight
// is no error (it may have just been answered).
func (p *peer) Preempt(_ context.Context, req *jsonrpc2.Request) (any, error) {
	if req.Method() != "$/cancelRequest" {
		return nil, jsonrpc2.ErrNotHandled
	}
	var params struct {
		ID json.RawMessage `json:"id"`
	}
	if err := decodeParams(req.Method(), req.Params(), &params); err != nil {
		if req.IsCall() {
			return nil, err.(*Error).toWire()
		}
		return jsonrpc2.RawMessage("null"), nil
	}
	if id, ok := readID(params.ID); ok {
		p.cancel(id)
	}
	return jsonrpc2.RawMessage("null"), nil
}

// dispatch releases each request to run concurrently and answers it.
func (p *peer) dispatch(ctx context.Context, req *jsonrpc2.Request) (any, error) {
	jsonrpc2.Async(ctx)
	if !req.IsCall() {
		// A notification's error would end the connection in the
		// library: there is no one to tell, so it is logged.
		if _, err := p.handle(ctx, req); err != nil {
			p.log.Debug("rpc: notification not handled", "method", req.Method(), "err", err)
		}
		return nil, nil
	}
	result, err := p.handle(ctx, req)
	if err != nil {
		var e *Error
		switch {
		case errors.As(err, &e):
		case ctx.Err() != nil && p.ctx.Err() == nil:
			e = failf(errclass.ErrCanceled, "request cancelled: %v", err)
		default:
			e = Errorf(CodeInternalError, "internal error: %v", err)
		}
		return nil, e.toWire()
	}
	return result, nil
}

// handle runs the handler and encodes its result under a panic guard: a
// panic is the request's internal error, not the connection's end (the
// library would end it).
func (p *peer) handle(ctx context.Context, req *jsonrpc2.Request) (result jsonrpc2.RawMessage, err error) {
	defer func() {
		if v := recover(); v != nil {
			p.log.Error("rpc: handler panicked", "method", req.Method(), "panic", v, "stack", string(debug.Stack()))
			result, err = nil, Errorf(CodeInternalError, "internal error handling %s: %v", req.Method(), v)
		}
	}()
	res, err := p.handler(ctx, req)
	if err != nil {
		return nil, err
	}
	return p.encode(res)
}

// encode writes a result once, here, to hold it to the message limit:
// the peer would skip a larger reply and wait for it for ever, so it gets
// an error it can act on instead.
func (p *peer) encode(result any) (jsonrpc2.RawMessage, error) {
	b, err := codec{}.Marshal(result)
	if err != nil {
		return nil, Errorf(CodeInternalError, "internal error: encoding the result: %v", err)
	}
	if int64(len(b)) > p.limit {
		return nil, Errorf(CodeInternalError,
			"internal error: the result of %d bytes exceeds the message limit of %d bytes (rpc.max_message_bytes) and was not sent; ask for less output, or raise the limit on both ends", len(b), p.limit)
	}
	return b, nil
}
