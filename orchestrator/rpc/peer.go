package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
	"go.lsp.dev/jsonrpc2"
)

// handlerFunc answers one inbound request. A returned *Error is sent as it
// is; any other error becomes an internal error (-32603) with its message.
// ctx ends when the peer cancels the request ($/cancelRequest) or the
// connection ends. Requests are handled concurrently.
type handlerFunc func(ctx context.Context, req *jsonrpc2.Request) (any, error)

// peer is one connection, both directions at once: go.lsp.dev/jsonrpc2's
// Conn over Berth's wire, with what Berth promises beyond the library's
// dispatch. Each request runs concurrently (the library's Async) with a
// context that $/cancelRequest ends, and is answered -32800 when it was;
// an id already in flight is refused; a panic is an internal error, not
// the end of the connection; a result over the message limit is not sent
// but answered -32603. A Call whose context ends sends $/cancelRequest,
// and every Call fails with ErrClosed once the connection is gone.
type peer struct {
	conn    jsonrpc2.Conn
	wire    *wire
	handler handlerFunc
	limit   int64
	log     *slog.Logger

	// ctx is the parent of every handler's context: it ends when the
	// reading ends or the peer is aborted, so the work of a gone peer
	// stops.
	ctx    context.Context
	cancel context.CancelFunc
	ended  chan struct{} // the reading has ended

	mu       sync.Mutex
	inflight map[jsonrpc2.ID]context.CancelFunc // the peer's requests being handled
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

// codec encodes params and results as encoding/json does (the same
// bytes, omitempty and null for nil slices included), with the faster
// encoding/json/v2 implementation the library is built on.
var codec jsonrpc2.Codec = v1Codec{}

type v1Codec struct{}

var v1Options = jsonv1.DefaultOptionsV1()

// Marshal passes JSON that is already encoded on as it is, as the
// library's codecs do: a harness's answer reaches a kernel's tool()
// without a second encoding.
func (v1Codec) Marshal(v any) ([]byte, error) {
	switch raw := v.(type) {
	case json.RawMessage:
		return raw, nil
	case jsonrpc2.RawMessage:
		return raw, nil
	}
	return jsonv2.Marshal(v, v1Options)
}

func (v1Codec) Unmarshal(data []byte, v any) error {
	switch raw := v.(type) {
	case *json.RawMessage:
		*raw = append(json.RawMessage(nil), data...)
		return nil
	case *jsonrpc2.RawMessage:
		*raw = append(jsonrpc2.RawMessage(nil), data...)
		return nil
	}
	return jsonv2.Unmarshal(data, v, v1Options)
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
	ctx, cancel := context.WithCancel(context.Background())
	p := &peer{handler: h, limit: o.limit, log: o.log, ctx: ctx, cancel: cancel,
		ended: make(chan struct{}), inflight: map[jsonrpc2.ID]context.CancelFunc{}}
	p.wire = &wire{f: f, onReject: o.onReject, log: o.log, onEnd: func() {
		close(p.ended)
		cancel()
	}}
	p.conn = jsonrpc2.NewConn(p.wire, jsonrpc2.WithCodec(codec))
	return p
}

func (p *peer) start() { p.conn.Go(p.ctx, p.dispatch) }

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
	p.cancel()
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
			_ = p.Notify(context.Background(), "$/cancelRequest", cancelParams{ID: json.RawMessage(fmt.Sprint(n))})
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

// cancelParams are $/cancelRequest's parameters.
type cancelParams struct {
	ID json.RawMessage `json:"id"`
}

// dispatch runs on the library's read loop. $/cancelRequest is handled
// there, in the order it came; any other request is registered as in
// flight (before the next message is read, so a $/cancelRequest right
// behind it finds it) and then released to run concurrently.
func (p *peer) dispatch(ctx context.Context, req *jsonrpc2.Request) (any, error) {
	if req.Method() == "$/cancelRequest" {
		return p.cancelRequest(req)
	}
	if !req.IsCall() {
		// A notification's error would end the connection in the
		// library: there is no one to tell, so it is logged.
		jsonrpc2.Async(ctx)
		if _, err := p.handle(p.ctx, req); err != nil {
			p.log.Debug("rpc: notification not handled", "method", req.Method(), "err", err)
		}
		return nil, nil
	}
	id := req.ID()
	// Not the library's ctx, which is recycled with the request: work a
	// tool leaves running may hold its context after the answer.
	rctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	p.mu.Lock()
	_, dup := p.inflight[id]
	if !dup {
		p.inflight[id] = cancel
	}
	p.mu.Unlock()
	if dup {
		return nil, Errorf(CodeInvalidRequest, "invalid request: id %v is already used by a request in flight; use a fresh id per request", id).toWire()
	}
	jsonrpc2.Async(ctx)
	result, err := p.handle(rctx, req)
	// Before the answer goes out: the peer may reuse the id once it has it.
	p.mu.Lock()
	delete(p.inflight, id)
	p.mu.Unlock()
	if err != nil {
		var e *Error
		switch {
		case errors.As(err, &e):
		case rctx.Err() != nil && p.ctx.Err() == nil:
			e = Errorf(CodeRequestCancelled, "request cancelled: %v", err)
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
	b, err := codec.Marshal(result)
	if err != nil {
		return nil, Errorf(CodeInternalError, "internal error: encoding the result: %v", err)
	}
	if int64(len(b)) > p.limit {
		return nil, Errorf(CodeInternalError,
			"internal error: the result of %d bytes exceeds the message limit of %d bytes (rpc.max_message_bytes) and was not sent; ask for less output, or raise the limit on both ends", len(b), p.limit)
	}
	return b, nil
}

// cancelRequest cancels the request in flight with the id given; an id
// that names none is no error (it may have just been answered).
func (p *peer) cancelRequest(req *jsonrpc2.Request) (any, error) {
	var params cancelParams
	id, ok := jsonrpc2.ID{}, false
	if json.Unmarshal(req.Params(), &params) == nil && len(params.ID) > 0 {
		var r *refusal
		id, r = checkID(params.ID)
		ok = r == nil
	}
	if !ok {
		if req.IsCall() {
			return nil, Errorf(CodeInvalidParams, "invalid params for $/cancelRequest: field \"id\" must be the string or integer id of a request in flight").toWire()
		}
		return nil, nil
	}
	p.mu.Lock()
	cancel := p.inflight[id]
	p.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	return nil, nil
}
