package rpc

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-dev/berth/orchestrator"
)

// reenterTool calls tool() through the run's harness and returns the
// harness's answer as its text, byte for byte, or the error.
type reenterTool struct{}

func (reenterTool) Spec() orchestrator.Spec {
	return orchestrator.Spec{Name: "reenter", Tier: orchestrator.Read, InputSchema: json.RawMessage(`{"type":"object"}`), ParallelSafe: true}
}

func (reenterTool) Call(ctx context.Context, run *orchestrator.Run, _ json.RawMessage) (*orchestrator.Result, error) {
	raw, err := run.Harness.CallTool(ctx, orchestrator.ToolCall{Name: "read", Arguments: json.RawMessage(`{"path":"a.txt"}`)})
	if err != nil {
		return orchestrator.Errorf("%v", err), nil
	}
	return orchestrator.Text(string(raw)), nil
}

// A harness's answer to harness/callTool reaches the tool as the JSON it
// sent, not decoded and encoded again; one that is not a tool result is
// refused, saying what it was (issue 12, item 4).
func TestHarnessResultIsForwardedRaw(t *testing.T) {
	s := newServer(t, 0)
	s.Registry.Add(toolsProvider{reenterTool{}})
	p, runID := startRunOverPipe(t, s)

	for _, tc := range []struct {
		answer string // the harness's result
		want   string // the tool's text, or the start of its error
		isErr  bool
	}{
		{answer: `{ "content" : [{"type":"text","text":"a<b\u00e9"}], "isError":false, "extra":{"k":1} }`, want: `{ "content" : [{"type":"text","text":"a<b\u00e9"}], "isError":false, "extra":{"k":1} }`},
		{answer: "{\"content\":[{\"type\":\"text\",\"text\":\"a\xffb\"}]}", want: "{\"content\":[{\"type\":\"text\",\"text\":\"a\uFFFDb\"}]}"},
		{answer: `"just text"`, want: "the harness answered harness/callTool with a string; it must answer with a tool result {content: [blocks], isError}", isErr: true},
		{answer: `{"content":"text"}`, want: `the harness answered harness/callTool with "content" that is a string`, isErr: true},
		{answer: `{"content":[{"type":"text"},3]}`, want: `the harness answered harness/callTool with a number among the "content" blocks`, isErr: true},
		// The library passes a result on unread: Berth reads it before a kernel does.
		{answer: `{"content":[{"type":}]}`, want: `the harness answered harness/callTool with a result that is not valid JSON`, isErr: true},
		{answer: `{"content":[],"isError":"yes"}`, want: `the harness answered harness/callTool with "isError" that is a string`, isErr: true},
	} {
		p.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"runId":"` + runID + `","name":"reenter"}}`)
		req := p.recv()
		if req["method"] != "harness/callTool" {
			t.Fatalf("got %v, want harness/callTool", req)
		}
		p.send(`{"jsonrpc":"2.0","id":` + string(mustJSON(t, req["id"])) + `,"result":` + tc.answer + `}`)
		m := p.recv()
		res, _ := m["result"].(map[string]any)
		text := ""
		if blocks, _ := res["content"].([]any); len(blocks) == 1 {
			text, _ = blocks[0].(map[string]any)["text"].(string)
		}
		if res["isError"] != tc.isErr || !strings.HasPrefix(text, tc.want) {
			t.Errorf("answer %s: got %v, want isError %v and %q", tc.answer, m, tc.isErr, tc.want)
		}
	}
}

// startRunOverPipe serves s on one end of a pipe, speaks raw frames on the
// other, starts a run in a fresh workdir and returns the peer and the run's
// id; the connection is closed and served out when the test ends.
func startRunOverPipe(t *testing.T, s *Server) (*rawPeer, string) {
	t.Helper()
	a, b := net.Pipe()
	served := make(chan struct{})
	go func() { s.ServeConn(NewStreamFramer(a, a, a, 0), "test"); close(served) }()
	p := &rawPeer{t: t, f: NewStreamFramer(b, b, b, 0)}
	t.Cleanup(func() {
		_ = p.f.Close()
		<-served
	})
	p.send(`{"jsonrpc":"2.0","id":1,"method":"run/start","params":{"workdir":` + strconv.Quote(t.TempDir()) + `}}`)
	return p, p.recv()["result"].(map[string]any)["runId"].(string)
}
