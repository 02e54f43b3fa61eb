package lsp

import (
	"context"
	"encoding/json"
	"net"
	"sync"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"
)

// slowPublishes records publishes, each slowly, as a busy machine might.
type slowPublishes struct {
	protocol.UnimplementedClient
	mu sync.Mutex
	n  int
}

func (c *slowPublishes) PublishDiagnostics(context.Context, *protocol.PublishDiagnosticsParams) error {
	time.Sleep(20 * time.Millisecond)
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return nil
}

// The publishes a server sends before it answers a request are all
// recorded when the answer reaches the caller, however slowly each is
// handled: the connection handles the server's messages in the order
// they come. Berth's check of a Go write relies on it: gopls answers
// gopls.diagnose_files after it has published what it found.
//
// Issue 28 (from review: protocol.NewClient runs every handler
// concurrently with the next message, and this failed on it).
func TestPublishesSentBeforeAnAnswerAreRecordedWhenItArrives(t *testing.T) {
	near, far := net.Pipe()
	defer near.Close()
	defer far.Close()
	client := &slowPublishes{}
	conn, api := Connect(client, jsonrpc2.NewHeaderStream(near))
	defer conn.Close()

	go func() { // the server: three publishes, then the answer
		s := jsonrpc2.NewHeaderStream(far)
		ctx := context.Background()
		msg, _, err := s.Read(ctx)
		if err != nil {
			return
		}
		call, ok := msg.(*jsonrpc2.Call)
		if !ok {
			return
		}
		params, _ := json.Marshal(map[string]any{"uri": "file:///w/x.go", "diagnostics": []any{}})
		for range 3 {
			if _, err := s.Write(ctx, jsonrpc2.NewNotification("textDocument/publishDiagnostics", params)); err != nil {
				return
			}
		}
		_, _ = s.Write(ctx, jsonrpc2.NewResponse(call.ID(), jsonrpc2.RawMessage("null"), nil))
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := api.ExecuteCommand(ctx, &protocol.ExecuteCommandParams{Command: "gopls.diagnose_files"}); err != nil {
		t.Fatal(err)
	}
	client.mu.Lock()
	n := client.n
	client.mu.Unlock()
	if n != 3 {
		t.Errorf("%d of the 3 publishes sent before the answer were recorded when it arrived", n)
	}
}
