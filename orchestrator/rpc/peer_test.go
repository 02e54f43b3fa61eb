package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"
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

// newRawPair starts a peer with h and returns the raw peer on the other
// end.
func newRawPair(t *testing.T, h handlerFunc, limit int64) (*peer, *rawPeer) {
	t.Helper()
	a, b := net.Pipe()
	c := newPeer(NewStreamFramer(a, a, a, limit), h, peerOptions{limit: limit})
	c.start()
	p := &rawPeer{t: t, f: NewStreamFramer(b, b, b, 0)}
	t.Cleanup(func() {
		_ = p.f.Close()
		_ = c.Close()
	})
	return c, p
}

// echoHandler answers "echo" with its params, "block" when its ctx ends,
// "panic" by panicking.
var echoHandler handlerFunc = func(ctx context.Context, r *jsonrpc2.Request) (any, error) {
	switch r.Method() {
	case "echo":
		return json.RawMessage(r.Params()), nil
	case "block":
		<-ctx.Done()
		return nil, ctx.Err()
	case "panic":
		panic("boom")
	}
	return nil, Errorf(CodeMethodNotFound, "method not found: %s", r.Method())
}

func TestBadMessagesGetErrorsAndTheConnectionStaysUsable(t *testing.T) {
	_, p := newRawPair(t, echoHandler, 64)
	cases := []struct {
		send string
		code int64
		want string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":`, CodeParseError, "not valid JSON"},
		{`{"jsonrpc":"2.0","id":2}`, CodeInvalidRequest, `exactly one of "result" and "error"`},
		{`{"jsonrpc":"2.0","id":3,"method":"nope"}`, CodeMethodNotFound, "nope"},
		{`{"jsonrpc":"2.0","id":4,"method":"echo","params":"` + strings.Repeat("x", 80) + `"}`, CodeInvalidRequest, "exceeds the limit of 64 bytes"},
		{`{"jsonrpc":"2.0","id":5,"method":"panic"}`, CodeInternalError, "boom"},
		{`{"jsonrpc":"2.0","id":6,"method":"$/cancelRequest","params":{}}`, CodeInvalidParams, `$/cancelRequest needs "id"`},
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

// peerPair joins two peers.
func peerPair(t *testing.T, ha, hb handlerFunc) (*peer, *peer) {
	t.Helper()
	a, b := net.Pipe()
	ca := newPeer(NewStreamFramer(a, a, a, 0), ha, peerOptions{})
	cb := newPeer(NewStreamFramer(b, b, b, 0), hb, peerOptions{})
	ca.start()
	cb.start()
	t.Cleanup(func() {
		_ = ca.Close()
		_ = cb.Close()
	})
	return ca, cb
}

func TestCancellingACallTellsThePeer(t *testing.T) {
	cancelled := make(chan struct{})
	started := make(chan struct{})
	ca, _ := peerPair(t, nil, handlerFunc(func(ctx context.Context, r *jsonrpc2.Request) (any, error) {
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
	ca, _ := peerPair(t, nil, handlerFunc(func(ctx context.Context, r *jsonrpc2.Request) (any, error) {
		if r.Method() == "fail" {
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
	ca, cb := peerPair(t, nil, handlerFunc(func(ctx context.Context, r *jsonrpc2.Request) (any, error) {
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
	big := handlerFunc(func(ctx context.Context, r *jsonrpc2.Request) (any, error) {
		if r.Method() == "big" {
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

// A response reaches its Call in any shape JSON allows; a result that
// does not fit the caller's type is the Call's error.
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
		{name: "a result of another type", body: `{"jsonrpc":"2.0","id":%d,"result":{"v":7}}`, wantErr: "unmarshaling result"},
		{name: "no result wanted", body: `{"jsonrpc":"2.0","id":%d,"result":[1]}`, nilResult: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, p := newRawPair(t, echoHandler, 0)
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

// Requests run at once: ten that each wait for all ten to start all
// finish.
func TestRequestsRunConcurrently(t *testing.T) {
	const n = 10
	var started sync.WaitGroup
	started.Add(n)
	all := make(chan struct{})
	go func() { started.Wait(); close(all) }()
	server, client := peerPair(t, func(ctx context.Context, r *jsonrpc2.Request) (any, error) {
		started.Done()
		select {
		case <-all:
			return "ok", nil
		case <-ctx.Done():
			return nil, errors.New("the other requests never started")
		}
	}, nil)
	errs := make(chan error, n)
	for range n {
		go func() { errs <- client.Call(context.Background(), "wait", nil, nil) }()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	_ = server
}
