package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rawPeer is the far end of a connection, speaking bytes.
type rawPeer struct {
	t *testing.T
	f Framer
}

func (p *rawPeer) send(body string) {
	p.t.Helper()
	if err := p.f.Write(context.Background(), []byte(body)); err != nil {
		p.t.Fatal(err)
	}
}

// recv reads one message as a generic object.
func (p *rawPeer) recv() map[string]any {
	p.t.Helper()
	b, err := p.f.Read(context.Background())
	if err != nil {
		p.t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		p.t.Fatalf("%q: %v", b, err)
	}
	return m
}

func errCode(m map[string]any) int64 {
	e, _ := m["error"].(map[string]any)
	if e == nil {
		return 0
	}
	return int64(e["code"].(float64))
}

func errMessage(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	if e == nil {
		return ""
	}
	return e["message"].(string)
}

// newRawPair starts a Conn with h and returns the raw peer on the other end.
func newRawPair(t *testing.T, h Handler, limit int64) (*Conn, *rawPeer) {
	t.Helper()
	a, b := net.Pipe()
	c := NewConn(NewStreamFramer(a, a, a, limit), ConnOptions{Handler: h})
	p := &rawPeer{t: t, f: NewStreamFramer(b, b, b, 0)}
	t.Cleanup(func() {
		_ = p.f.Close()
		_ = c.Close()
	})
	return c, p
}

// echoHandler answers "echo" with its params, "block" when its ctx ends,
// "panic" by panicking.
var echoHandler = HandlerFunc(func(ctx context.Context, r *Request) (any, error) {
	switch r.Method {
	case "echo":
		return r.Params, nil
	case "block":
		<-ctx.Done()
		return nil, ctx.Err()
	case "panic":
		panic("boom")
	}
	return nil, Errorf(CodeMethodNotFound, "method not found: %s", r.Method)
})

func TestBadMessagesGetErrorsAndTheConnectionStaysUsable(t *testing.T) {
	_, p := newRawPair(t, echoHandler, 64)
	cases := []struct {
		send string
		code int64
		want string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":`, CodeParseError, "not valid JSON"},
		{`{"jsonrpc":"2.0","id":2}`, CodeInvalidRequest, "exactly one"},
		{`{"jsonrpc":"2.0","id":3,"method":"nope"}`, CodeMethodNotFound, "nope"},
		{`{"jsonrpc":"2.0","id":4,"method":"echo","params":"` + strings.Repeat("x", 80) + `"}`, CodeInvalidRequest, "exceeds the limit of 64 bytes"},
		{`{"jsonrpc":"2.0","id":5,"method":"panic"}`, CodeInternalError, "boom"},
	}
	for _, c := range cases {
		p.send(c.send)
		m := p.recv()
		if errCode(m) != c.code || !strings.Contains(errMessage(m), c.want) {
			t.Errorf("%s: got %v, want code %d with %q", c.send, m, c.code, c.want)
		}
		p.send(`{"jsonrpc":"2.0","id":"ok","method":"echo","params":{"a":1}}`)
		if m := p.recv(); m["id"] != "ok" || m["result"].(map[string]any)["a"] != 1.0 {
			t.Fatalf("after %s the connection does not answer: %v", c.send, m)
		}
	}
}

func TestCancelRequestCancelsTheHandler(t *testing.T) {
	_, p := newRawPair(t, echoHandler, 0)
	p.send(`{"jsonrpc":"2.0","id":7,"method":"block"}`)
	p.send(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":7}}`)
	m := p.recv()
	if m["id"] != 7.0 || errCode(m) != CodeRequestCancelled {
		t.Fatalf("got %v, want a cancelled error for id 7", m)
	}
}

func TestDuplicateIDInFlightIsRefused(t *testing.T) {
	_, p := newRawPair(t, echoHandler, 0)
	p.send(`{"jsonrpc":"2.0","id":"x","method":"block"}`)
	p.send(`{"jsonrpc":"2.0","id":"x","method":"echo"}`)
	if m := p.recv(); errCode(m) != CodeInvalidRequest || !strings.Contains(errMessage(m), "already used") {
		t.Fatalf("got %v", m)
	}
	p.send(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"x"}}`)
	if m := p.recv(); errCode(m) != CodeRequestCancelled {
		t.Fatalf("got %v", m)
	}
}

// connPair joins two Conns.
func connPair(t *testing.T, ha, hb Handler) (*Conn, *Conn) {
	t.Helper()
	a, b := net.Pipe()
	ca := NewConn(NewStreamFramer(a, a, a, 0), ConnOptions{Handler: ha})
	cb := NewConn(NewStreamFramer(b, b, b, 0), ConnOptions{Handler: hb})
	t.Cleanup(func() {
		_ = ca.Close()
		_ = cb.Close()
	})
	return ca, cb
}

func TestCancellingACallTellsThePeer(t *testing.T) {
	cancelled := make(chan struct{})
	started := make(chan struct{})
	ca, _ := connPair(t, nil, HandlerFunc(func(ctx context.Context, r *Request) (any, error) {
		close(started)
		<-ctx.Done()
		close(cancelled)
		return nil, ctx.Err()
	}))
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- ca.Call(ctx, "slow", nil, nil) }()
	<-started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Call returned %v, want context.Canceled", err)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the peer's handler was not cancelled")
	}
}

func TestCallReturnsThePeersErrorAndResult(t *testing.T) {
	ca, _ := connPair(t, nil, HandlerFunc(func(ctx context.Context, r *Request) (any, error) {
		if r.Method == "fail" {
			return nil, Errorf(-1, "no human is connected")
		}
		return map[string]int{"n": 2}, nil
	}))
	var out struct{ N int }
	if err := ca.Call(context.Background(), "ok", map[string]int{}, &out); err != nil || out.N != 2 {
		t.Fatalf("got %v, %+v", err, out)
	}
	err := ca.Call(context.Background(), "fail", nil, nil)
	var e *Error
	if !errors.As(err, &e) || e.Error() != "no human is connected" {
		t.Fatalf("got %v", err)
	}
}

func TestCallsFailWhenThePeerGoesAway(t *testing.T) {
	started := make(chan struct{})
	ca, cb := connPair(t, nil, HandlerFunc(func(ctx context.Context, r *Request) (any, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}))
	errc := make(chan error, 1)
	go func() { errc <- ca.Call(context.Background(), "slow", nil, nil) }()
	<-started
	_ = cb.Close()
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("got %v, want ErrClosed", err)
	}
}

func TestNilParamsAreLeftOut(t *testing.T) {
	c, p := newRawPair(t, echoHandler, 0)
	go func() { _ = c.Notify(context.Background(), "note", nil) }()
	m := p.recv()
	if _, ok := m["params"]; ok || m["method"] != "note" {
		t.Fatalf("got %v, want no params member", m)
	}
}

// A result over the limit is not sent (the peer would skip it and wait
// forever): the request gets an error naming the limit instead, and the
// connection stays usable.
func TestResultOverTheLimitIsAnError(t *testing.T) {
	big := HandlerFunc(func(ctx context.Context, r *Request) (any, error) {
		if r.Method == "big" {
			return strings.Repeat("x", 200), nil
		}
		return echoHandler(ctx, r)
	})
	_, p := newRawPair(t, big, 100)
	p.send(`{"jsonrpc":"2.0","id":1,"method":"big"}`)
	if m := p.recv(); m["id"] != 1.0 || errCode(m) != CodeInternalError || !strings.Contains(errMessage(m), "result of 202 bytes exceeds the message limit of 100 bytes") {
		t.Fatalf("oversized result: got %v", m)
	}
	p.send(`{"jsonrpc":"2.0","id":2,"method":"echo","params":{"a":1}}`)
	if m := p.recv(); m["id"] != 2.0 || m["result"] == nil {
		t.Fatalf("after an oversized result: %v", m)
	}
}

// A response in resultBytes' shape is routed without parsing its result
// first; one that only starts like it, or has a string id, is read the
// thorough way; a result that is not JSON is an error even when the
// caller wants no result.
func TestResponsesInEveryShapeReachTheirCall(t *testing.T) {
	cases := []struct {
		name, body string // %d is the request's id
		want       string
		wantErr    string
		nilResult  bool
	}{
		{name: "our shape", body: `{"jsonrpc":"2.0","id":%d,"result":{"v":"fast"}}`, want: "fast"},
		{name: "a member after the result", body: `{"jsonrpc":"2.0","id":%d,"result":{"v":"late"},"extra":1}`, want: "late"},
		{name: "spaces", body: `{ "jsonrpc": "2.0", "id": %d, "result": {"v": "spaced"} }`, want: "spaced"},
		{name: "an error", body: `{"jsonrpc":"2.0","id":%d,"error":{"code":-32601,"message":"nope"}}`, wantErr: "nope"},
		{name: "broken result", body: `{"jsonrpc":"2.0","id":%d,"result":{"v":}`, wantErr: "not valid JSON", nilResult: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, p := newRawPair(t, nil, 0)
			type out struct {
				V string `json:"v"`
			}
			errc := make(chan error, 1)
			var got out
			go func() {
				if tc.nilResult {
					errc <- c.Call(context.Background(), "m", nil, nil)
					return
				}
				errc <- c.Call(context.Background(), "m", nil, &got)
			}()
			req := p.recv()
			p.send(strings.Replace(tc.body, "%d", string(mustJSON(t, req["id"])), 1))
			select {
			case err := <-errc:
				switch {
				case tc.wantErr != "":
					if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
						t.Fatalf("got %v, want an error with %q", err, tc.wantErr)
					}
				case err != nil || got.V != tc.want:
					t.Fatalf("got %+v, %v; want %q", got, err, tc.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the call never returned")
			}
		})
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Requests run at once, whether on kept workers or new ones: ten that
// each wait for all ten to start all finish, twice over (the second
// round reuses the first round's idle workers).
func TestRequestsRunConcurrentlyOnKeptWorkers(t *testing.T) {
	const n = 10
	type round struct {
		started sync.WaitGroup
		all     chan struct{}
	}
	var current atomic.Pointer[round]
	h := HandlerFunc(func(ctx context.Context, r *Request) (any, error) {
		rd := current.Load()
		rd.started.Done()
		select {
		case <-rd.all:
			return "ok", nil
		case <-time.After(5 * time.Second):
			return nil, errors.New("the other requests never started")
		}
	})
	a, b := net.Pipe()
	server := NewConn(NewStreamFramer(a, a, a, 0), ConnOptions{Handler: h})
	client := NewConn(NewStreamFramer(b, b, b, 0), ConnOptions{})
	defer server.Close()
	defer client.Close()
	for i := range 2 {
		rd := &round{all: make(chan struct{})}
		rd.started.Add(n)
		current.Store(rd)
		go func() { rd.started.Wait(); close(rd.all) }()
		errs := make(chan error, n)
		for range n {
			go func() { errs <- client.Call(context.Background(), "wait", nil, nil) }()
		}
		for range n {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
		}
		if idle := server.idle.Load(); idle > maxIdleWorkers {
			t.Errorf("round %d: %d idle workers kept, the cap is %d", i, idle, maxIdleWorkers)
		}
	}
}
