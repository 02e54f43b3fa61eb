package debug

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/google/go-dap"

	"github.com/berth-dev/berth/internal/boundedio"
)

// client is one DAP connection. Its reader goroutine is the only reader of
// the stream: it routes each response to the request that waits for it
// (by request_seq) and each event first to onEvent, then to the waiters
// registered for it. Writers take wmu; pending and waiters are under mu,
// and are registered before the request is written so that an answer can
// never arrive before someone waits for it.
type client struct {
	w       io.Writer
	wmu     sync.Mutex
	onEvent func(dap.EventMessage) // called on the reader goroutine

	mu      sync.Mutex
	seq     int
	pending map[int]chan dap.Message
	waiters []*waiter
	err     error // why the reader stopped; set before done closes

	done chan struct{}
}

// waiter is a registration for the first event that match accepts.
type waiter struct {
	match func(dap.EventMessage) bool
	ch    chan dap.EventMessage
}

// newClient starts the reader goroutine on r.
func newClient(r io.Reader, w io.Writer, onEvent func(dap.EventMessage)) *client {
	return newClientFrom(r, w, onEvent, 0)
}

// newClientFrom is newClient whose first request is numbered seq+1.
func newClientFrom(r io.Reader, w io.Writer, onEvent func(dap.EventMessage), seq int) *client {
	c := &client{w: w, onEvent: onEvent, seq: seq, pending: map[int]chan dap.Message{}, done: make(chan struct{})}
	// go-dap reads a header to its first '\r' with no limit: the reader
	// in front of it refuses a header line, a header block or a declared
	// body over its limit before go-dap buffers it (issue 24 item 1).
	go c.read(bufio.NewReader(boundedio.NewFramed(r, boundedio.Limits{Body: maxMessage, CRLF: true})))
	return c
}

// Done is closed when the reader has stopped; Err says why.
func (c *client) Done() <-chan struct{} { return c.done }

// Err is why the reader stopped (nil while it runs).
func (c *client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// maxMessage bounds a message from an adapter: go-dap's own limit.
const maxMessage = 4 << 20

// envelope is the part of any message needed to route it when go-dap
// cannot decode the rest.
type envelope struct {
	Seq        int    `json:"seq"`
	Type       string `json:"type"`
	Command    string `json:"command"`
	Event      string `json:"event"`
	RequestSeq int    `json:"request_seq"`
}

func (c *client) read(r *bufio.Reader) {
	var err error
	// A panic while decoding or applying one message (a bug, or an
	// adapter's message no one foresaw) ends this session, not Berth.
	defer func() {
		if p := recover(); p != nil {
			c.stop(fmt.Errorf("internal error while reading the adapter's messages: %v", p))
		}
	}()
	for {
		var data []byte
		data, err = dap.ReadBaseMessage(r)
		if err != nil {
			var refused *boundedio.Error
			if errors.As(err, &refused) {
				next := "an adapter's header is one short line: it is broken, or something other than the adapter writes to its output"
				if errors.Is(err, boundedio.ErrBody) {
					next = "an adapter's messages are smaller: it is broken, or something other than the adapter writes to its output"
				}
				err = fmt.Errorf("the adapter sent %v, so Berth stopped reading it and ended the session; %s", refused, next)
			} else if errors.Is(err, dap.ErrHeaderContentTooLong) {
				err = fmt.Errorf("the adapter sent a message over 4 MiB, which Berth does not read")
			} else if _, ok := err.(*dap.BaseProtocolError); ok {
				err = fmt.Errorf("the adapter sent a malformed message header: %v", err)
			}
			break
		}
		var env envelope
		if jerr := json.Unmarshal(data, &env); jerr != nil {
			err = fmt.Errorf("the adapter sent a message that is not JSON: %v", jerr)
			break
		}
		msg, derr := dap.DecodeProtocolMessage(data)
		if derr != nil {
			c.undecodable(env, derr)
			continue
		}
		c.route(msg)
	}
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		err = errors.New("the adapter closed its connection")
	}
	c.stop(err)
}

// stop records why reading ended and closes done. Whoever still waits
// selects on done; dropping the maps makes later sends fail at once.
func (c *client) stop(err error) {
	c.mu.Lock()
	c.err = err
	c.pending = nil
	c.waiters = nil
	c.mu.Unlock()
	close(c.done)
}

// undecodable handles a JSON message go-dap could not type: custom events
// (debugpy's, dart's) are ignored, a request the client does not serve
// gets an error response, and a response is delivered as a failure so its
// caller does not wait forever.
func (c *client) undecodable(env envelope, derr error) {
	switch env.Type {
	case "request":
		_ = c.write(&dap.ErrorResponse{Response: dap.Response{
			ProtocolMessage: dap.ProtocolMessage{Type: "response"},
			RequestSeq:      env.Seq, Command: env.Command, Success: false,
			Message: "not supported by this client",
		}})
	case "response":
		c.deliver(env.RequestSeq, &dap.ErrorResponse{Response: dap.Response{
			ProtocolMessage: dap.ProtocolMessage{Type: "response", Seq: env.Seq},
			RequestSeq:      env.RequestSeq, Command: env.Command,
			Message: "the adapter's answer could not be decoded: " + derr.Error(),
		}})
	}
}

func (c *client) route(msg dap.Message) {
	switch m := msg.(type) {
	case dap.ResponseMessage:
		c.deliver(m.GetResponse().RequestSeq, m)
	case dap.EventMessage:
		if c.onEvent != nil {
			c.onEvent(m)
		}
		c.mu.Lock()
		var hit []*waiter
		kept := c.waiters[:0]
		for _, w := range c.waiters {
			if w.match(m) {
				hit = append(hit, w)
			} else {
				kept = append(kept, w)
			}
		}
		c.waiters = kept
		c.mu.Unlock()
		for _, w := range hit {
			w.ch <- m
		}
	case dap.RequestMessage:
		rq := m.GetRequest()
		_ = c.write(&dap.ErrorResponse{Response: dap.Response{
			ProtocolMessage: dap.ProtocolMessage{Type: "response"},
			RequestSeq:      rq.Seq, Command: rq.Command, Success: false,
			Message: "not supported by this client",
		}})
	}
}

func (c *client) deliver(requestSeq int, m dap.Message) {
	c.mu.Lock()
	ch, ok := c.pending[requestSeq]
	delete(c.pending, requestSeq)
	c.mu.Unlock()
	if ok {
		ch <- m
	}
}

// watch registers a waiter for the first event whose name is one of
// names; register it before sending the request that causes the event.
func (c *client) watch(names ...string) *waiter {
	w := &waiter{ch: make(chan dap.EventMessage, 1), match: func(e dap.EventMessage) bool {
		for _, n := range names {
			if e.GetEvent().Event == n {
				return true
			}
		}
		return false
	}}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending != nil {
		c.waiters = append(c.waiters, w)
	}
	return w
}

// unwatch drops a waiter that is no longer wanted.
func (c *client) unwatch(w *waiter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range c.waiters {
		if x == w {
			c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
			return
		}
	}
}

// wait waits for w's event, the end of the connection or ctx.
func (c *client) wait(ctx context.Context, w *waiter) (dap.EventMessage, error) {
	select {
	case e := <-w.ch:
		return e, nil
	case <-c.done:
		select {
		case e := <-w.ch:
			return e, nil
		default:
		}
		return nil, fmt.Errorf("%w: %v", ErrEnded, c.Err())
	case <-ctx.Done():
		c.unwatch(w)
		return nil, ctx.Err()
	}
}

// send writes a request (its Seq is set here) and returns the channel its
// response will arrive on.
func (c *client) send(req dap.RequestMessage) (<-chan dap.Message, error) {
	ch := make(chan dap.Message, 1)
	c.mu.Lock()
	if c.pending == nil {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: %v", ErrEnded, c.Err())
	}
	c.seq++
	r := req.GetRequest()
	r.Seq, r.Type = c.seq, "request"
	c.pending[c.seq] = ch
	c.mu.Unlock()
	if err := c.write(req); err != nil {
		c.mu.Lock()
		if c.pending != nil {
			delete(c.pending, r.Seq)
		}
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: writing %s: %v", ErrEnded, r.Command, err)
	}
	return ch, nil
}

// await waits for a response sent with send; an error response becomes an
// *adapterError.
func (c *client) await(ctx context.Context, command string, ch <-chan dap.Message) (dap.Message, error) {
	select {
	case m := <-ch:
		return m, responseError(command, m)
	case <-c.done:
		select {
		case m := <-ch:
			return m, responseError(command, m)
		default:
		}
		return nil, fmt.Errorf("%w: %v", ErrEnded, c.Err())
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("%s: %w", command, ErrTimeout)
		}
		return nil, ctx.Err()
	}
}

// call sends a request and waits for its response.
func (c *client) call(ctx context.Context, req dap.RequestMessage) (dap.Message, error) {
	ch, err := c.send(req)
	if err != nil {
		return nil, err
	}
	return c.await(ctx, req.GetRequest().Command, ch)
}

func responseError(command string, m dap.Message) error {
	r, ok := m.(dap.ResponseMessage)
	if !ok || r.GetResponse().Success {
		return nil
	}
	msg := r.GetResponse().Message
	if er, ok := m.(*dap.ErrorResponse); ok && er.Body.Error != nil && er.Body.Error.Format != "" {
		msg = expand(er.Body.Error.Format, er.Body.Error.Variables)
	}
	if msg == "" {
		msg = "no reason given"
	}
	return &adapterError{command: command, message: msg}
}

// expand fills {name} placeholders of a DAP error format.
func expand(format string, vars map[string]string) string {
	for k, v := range vars {
		format = strings.ReplaceAll(format, "{"+k+"}", v)
	}
	return format
}

func (c *client) write(m dap.Message) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return dap.WriteProtocolMessage(c.w, m)
}
