package lsp

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"
)

// notification is a server's notification as the stream reads it.
func notification(t *testing.T, method string, params any) jsonrpc2.Message {
	t.Helper()
	b, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	return jsonrpc2.NewNotification(method, b)
}

// The end of an awaited token's progress, as read, hands its waiter the
// number of publishes read before it; an end of a token no one awaits
// (the server's own, a number, one dropped), a progress that is not an
// end, and a second end change nothing.
//
// Issue 28: gopls's diagnostics are pulled through a command whose
// progress ends after its publishes, and the connection runs handlers in
// no set order.
func TestAProgressEndHandsItsWaiterThePublishesReadBeforeIt(t *testing.T) {
	var p progressEnds
	a, endedA := p.await()
	b, endedB := p.await()
	if a == b {
		t.Fatalf("two awaits got the same token %q", a)
	}
	publish := notification(t, "textDocument/publishDiagnostics", map[string]any{"uri": "file:///x.go", "diagnostics": []any{}})
	end := func(token any) jsonrpc2.Message {
		return notification(t, "$/progress", map[string]any{"token": token, "value": map[string]any{"kind": "end"}})
	}
	p.read(publish)
	p.read(publish)
	p.read(notification(t, "$/progress", map[string]any{"token": b, "value": map[string]any{"kind": "begin", "title": "Diagnose files"}}))
	p.read(end("the server's own"))
	p.read(end(7))
	select {
	case got := <-endedB:
		t.Fatalf("a begin or another token's end ended %q (%d)", b, got)
	default:
	}
	p.read(end(b))
	select {
	case got := <-endedB:
		if got != 2 {
			t.Errorf("the end of %q came after %d publishes read, want 2", b, got)
		}
	default:
		t.Fatalf("the end of %q did not reach its waiter", b)
	}
	p.read(end(b)) // a second end: no one waits, nothing blocks
	p.read(publish)
	p.read(end(a))
	if got := <-endedA; got != 3 {
		t.Errorf("the end of %q came after %d publishes read, want 3", a, got)
	}
	c, endedC := p.await()
	p.drop(c)
	p.read(end(c))
	select {
	case <-endedC:
		t.Errorf("a dropped token's end reached its waiter")
	default:
	}
	p.drop(a)
	p.drop(b)
	if len(p.waiting) != 0 {
		t.Errorf("%d waiters left after every token was dropped", len(p.waiting))
	}
}

// reach returns once the store has recorded as many publishes as asked,
// however late the handlers run, and false when the server exits first.
func TestTheDiagnosticsStoreReachesACountOfPublishes(t *testing.T) {
	stop := make(chan struct{})
	ds := diagStore{debounce: time.Millisecond, timeout: time.Minute, stop: stop}
	go func() {
		for range 3 {
			time.Sleep(10 * time.Millisecond)
			ds.publish("/w/x.go", 1, nil, false)
		}
	}()
	if !ds.reach(context.Background(), 3) {
		t.Fatal("reach(3) returned false")
	}
	if n := ds.count(); n < 3 {
		t.Errorf("reach(3) returned with %d publishes recorded", n)
	}
	close(stop)
	if ds.reach(context.Background(), 4) {
		t.Error("reach(4) after the server exited returned true")
	}
}
