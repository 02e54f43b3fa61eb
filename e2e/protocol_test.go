package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// rawStdio is "orchestrator serve --stdio" spoken to byte by byte.
type rawStdio struct {
	t  *testing.T
	f  rpc.Framer
	in io.Writer // the binary's stdin, for bytes no framer would write
}

// startRaw starts the binary on stdio with args after "serve --stdio".
func startRaw(t *testing.T, env []string, args ...string) *rawStdio {
	t.Helper()
	cmd := command(env, append([]string{"serve", "--stdio"}, args...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := newStderr()
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		awaitExit(t, cmd, stderr, func() error {
			stdin.Close()
			_, _ = io.Copy(io.Discard, stdout)
			return cmd.Wait()
		})
	})
	return &rawStdio{t: t, f: rpc.NewStreamFramer(stdout, stdin, nil, 0), in: stdin}
}

func (r *rawStdio) send(body string) {
	r.t.Helper()
	if err := r.f.Write(context.Background(), []byte(body)); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rawStdio) recv() map[string]any {
	r.t.Helper()
	type result struct {
		b   []byte
		err error
	}
	ch := make(chan result, 1)
	go func() {
		b, err := r.f.Read(context.Background())
		ch <- result{b, err}
	}()
	select {
	case res := <-ch:
		if res.err != nil {
			r.t.Fatalf("reading a reply: %v", res.err)
		}
		var m map[string]any
		if err := json.Unmarshal(res.b, &m); err != nil {
			r.t.Fatalf("reply %q: %v", res.b, err)
		}
		return m
	case <-time.After(30 * time.Second):
		r.t.Fatal("no reply within 30s")
	}
	return nil
}

func replyError(m map[string]any) (int64, string) {
	e, _ := m["error"].(map[string]any)
	if e == nil {
		return 0, ""
	}
	return int64(e["code"].(float64)), e["message"].(string)
}

// Every kind of bad message gets its error code and a message that says
// what was wrong, and the connection answers the next request.
func TestErrorCodesKeepTheConnectionUsable(t *testing.T) {
	r := startRaw(t, []string{testTools}, "--config", writeConfig(t, "rpc:\n  max_message_bytes: 4096\n"))
	r.send(`{"jsonrpc":"2.0","id":1,"method":"run/start","params":{"workdir":` + mustQuote(t.TempDir()) + `}}`)
	start := r.recv()
	runID := start["result"].(map[string]any)["runId"].(string)

	cases := []struct {
		name, send string
		code       int64
		want       string
	}{
		{"malformed JSON", `{"jsonrpc":"2.0","id":2,"method":"tools/list",`, -32700, "not valid JSON"},
		{"not an object", `[1,2,3]`, -32600, "must be a JSON object"},
		{"wrong version", `{"jsonrpc":"1.0","id":3,"method":"tools/list"}`, -32600, `"jsonrpc" must be "2.0"`},
		{"unknown method", `{"jsonrpc":"2.0","id":4,"method":"tools/delete","params":{}}`, -32601, "tools/delete"},
		{"missing field", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"runId":"` + runID + `"}}`, -32602, `tools/call needs "name"`},
		{"unknown field", `{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{"runId":"` + runID + `","surfce":"plan"}}`, -32602, `tools/list does not take "surfce" (it takes only "runId", "surface")`},
		{"wrong type", `{"jsonrpc":"2.0","id":7,"method":"run/stop","params":{"runId":7}}`, -32602, `"runId" must be a string, not a number`},
		{"unknown run", `{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{"runId":"run_missing"}}`, rpc.CodeUnknownRun, `unknown run "run_missing"`},
		{"too large", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"runId":"` + runID + `","name":"test_echo","arguments":{"text":"` + strings.Repeat("a", 5000) + `"}}}`, -32600, "exceeds the limit of 4096 bytes"},
	}
	for i, c := range cases {
		r.send(c.send)
		code, msg := replyError(r.recv())
		if code != c.code || !strings.Contains(msg, c.want) {
			t.Errorf("%s: got %d %q, want %d containing %q", c.name, code, msg, c.code, c.want)
		}
		id := 100 + i
		r.send(`{"jsonrpc":"2.0","id":` + itoa(id) + `,"method":"tools/call","params":{"runId":"` + runID + `","name":"test_echo","arguments":{"text":"still here"}}}`)
		m := r.recv()
		res, _ := m["result"].(map[string]any)
		if m["id"] != float64(id) || res == nil || !strings.Contains(mustString(t, res), "still here") {
			t.Fatalf("after %s the connection does not answer: %v", c.name, m)
		}
	}
	// Arguments that break the tool's schema are a tool error result the
	// model can act on, naming the field.
	r.send(`{"jsonrpc":"2.0","id":200,"method":"tools/call","params":{"runId":"` + runID + `","name":"test_echo","arguments":{"text":3,"extra":1}}}`)
	res := r.recv()["result"].(map[string]any)
	if msg := mustString(t, res); res["isError"] != true || !strings.Contains(msg, `test_echo does not take \"extra\"`) || !strings.Contains(msg, `\"text\" must be a string, not a number`) {
		t.Errorf("bad arguments: %v", res)
	}
}

// A panicking tool is an error result; the server goes on serving.
func TestPanickingToolIsAnErrorResult(t *testing.T) {
	c := startStdio(t, testTools)
	run := newRun(t, c, "", nil)
	res := callTool(t, c, run, "test_panic", nil)
	if !res.IsError || !strings.Contains(text(res), "internal error") {
		t.Fatalf("got %+v", res)
	}
	if res := callTool(t, c, run, "test_echo", map[string]string{"text": "alive"}); text(res) != "alive" {
		t.Fatalf("after the panic: %+v", res)
	}
}

// Cancelling a call sends $/cancelRequest; the tool sees its context end
// and the call fails as cancelled, promptly.
func TestCancelRequestStopsASlowCall(t *testing.T) {
	c := startStdio(t, testTools)
	run := newRun(t, c, "", nil)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	_, err := c.CallTool(ctx, run, orchestrator.SurfaceFull, "test_slow", map[string]float64{"seconds": 60})
	if err == nil || time.Since(start) > 10*time.Second {
		t.Fatalf("got %v after %s", err, time.Since(start))
	}
	// The raw protocol: the reply to the cancelled request is -32800.
	r := startRaw(t, []string{testTools})
	r.send(`{"jsonrpc":"2.0","id":1,"method":"run/start","params":{"workdir":` + mustQuote(t.TempDir()) + `}}`)
	runID := r.recv()["result"].(map[string]any)["runId"].(string)
	r.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"runId":"` + runID + `","name":"test_slow","arguments":{"seconds":60}}}`)
	time.Sleep(200 * time.Millisecond)
	r.send(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":2}}`)
	m := r.recv()
	if code, msg := replyError(m); m["id"] != 2.0 || code != rpc.CodeRequestCancelled {
		t.Fatalf("got %v (%d %s), want -32800 for id 2", m, code, msg)
	}
}

// Calls of a tool that is not parallel-safe never overlap on one run.
func TestNonParallelSafeToolsAreSerialised(t *testing.T) {
	c := startStdio(t, testTools)
	run := newRun(t, c, "", nil)
	results := make(chan string, 4)
	for range 4 {
		go func() {
			res, err := c.CallTool(testCtx(t), run, orchestrator.SurfaceFull, "test_serial", map[string]int{"ms": 100})
			if err != nil {
				results <- err.Error()
				return
			}
			results <- text(res)
		}()
	}
	for range 4 {
		if got := <-results; got != "max overlap 1" {
			t.Errorf("got %q, want max overlap 1", got)
		}
	}
}

// harness/ask and harness/callTool reach the client's handlers, and a
// harness's refusal reaches the tool in its own words.
func TestReverseRequests(t *testing.T) {
	c := startStdio(t, testTools)
	run := newRun(t, c, "", nil)
	c.OnAsk(func(_ context.Context, p rpc.AskParams) (*orchestrator.Answer, error) {
		if p.RunID != run || p.Card.Question != "deploy?" || p.TimeoutSeconds != 5 {
			t.Errorf("harness/ask params: %+v", p)
		}
		return &orchestrator.Answer{Outcome: "answered", Selected: []string{"yes"}}, nil
	})
	res := callTool(t, c, run, "test_ask", map[string]any{"question": "deploy?", "timeout_seconds": 5})
	if res.IsError || !strings.Contains(text(res), `"selected":["yes"]`) {
		t.Errorf("answered: %+v", res)
	}
	c.OnAsk(func(context.Context, rpc.AskParams) (*orchestrator.Answer, error) {
		return nil, &rpc.Error{Code: -32000, Message: "no human is connected"}
	})
	res = callTool(t, c, run, "test_ask", map[string]any{"question": "deploy?"})
	if !res.IsError || !strings.Contains(text(res), "no human is connected") {
		t.Errorf("refused: %+v", res)
	}
	c.OnCallTool(func(_ context.Context, p rpc.HarnessCallToolParams) (*orchestrator.Result, error) {
		if p.RunID != run || p.Name != "read" || p.Origin.Tool != "test_reenter" || string(p.Arguments) != `{"path":"a.txt"}` {
			t.Errorf("harness/callTool params: %+v", p)
		}
		return orchestrator.Text("contents of a.txt"), nil
	})
	res = callTool(t, c, run, "test_reenter", map[string]any{"name": "read", "arguments": map[string]string{"path": "a.txt"}})
	if res.IsError || !strings.Contains(text(res), "contents of a.txt") {
		t.Errorf("callTool: %+v", res)
	}
}

// Runs belong to the connection that started them.
func TestRunOwnershipAcrossConnections(t *testing.T) {
	s := startServe(t, []string{testTools})
	a, b := dial(t, s), dial(t, s)
	run := newRun(t, a, "", nil)
	ctx := testCtx(t)
	if _, err := b.ListTools(ctx, run, orchestrator.SurfaceFull); rpcCode(err) != rpc.CodeUnknownRun {
		t.Errorf("tools/list from another connection: %v", err)
	}
	if _, err := b.CallTool(ctx, run, orchestrator.SurfaceFull, "test_echo", map[string]string{"text": "x"}); rpcCode(err) != rpc.CodeUnknownRun {
		t.Errorf("tools/call from another connection: %v", err)
	}
	if err := b.StopRun(ctx, run); rpcCode(err) != rpc.CodeUnknownRun {
		t.Errorf("run/stop from another connection: %v", err)
	}
	if res := callTool(t, a, run, "test_echo", map[string]string{"text": "mine"}); text(res) != "mine" {
		t.Errorf("the owner's call: %+v", res)
	}
}

func TestWebSocketNeedsTheToken(t *testing.T) {
	s := startServe(t, nil)
	for _, token := range []string{"", "wrong-token"} {
		_, err := rpc.DialWebSocket(testCtx(t), s.URL(), token, rpc.ClientOptions{})
		if err == nil || !strings.Contains(err.Error(), "HTTP 401") {
			t.Errorf("token %q: got %v, want HTTP 401", token, err)
		}
	}
	req, _ := http.NewRequest("GET", s.HTTP()+rpc.RPCPath, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("plain GET without a token: %d", resp.StatusCode)
	}
	dial(t, s)
}

// With no token configured, serve generates one into a private file and
// prints its path.
func TestServeGeneratesAToken(t *testing.T) {
	dir := t.TempDir()
	s := startServeArgs(t, []string{"XDG_RUNTIME_DIR=" + dir, "BERTH_TOKEN="}, "", "serve", "--listen", "127.0.0.1:0")
	path := filepath.Join(dir, "berth", "token")
	if !strings.Contains(s.Stderr.String(), "token written to "+path) {
		t.Errorf("serve did not print the token's path:\n%s", s.Stderr.String())
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", st, err)
	}
	b, _ := os.ReadFile(path)
	s.Token = strings.TrimSpace(string(b))
	dial(t, s)
}

func TestUnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "berth.sock")
	cmd := command([]string{testTools}, "serve", "--unix", sock)
	stderr := newStderr()
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		if _, err := os.Stat(sock); !os.IsNotExist(err) {
			t.Errorf("the socket file is left behind: %v", err)
		}
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if st, err := os.Stat(sock); err == nil {
			if st.Mode().Perm() != 0o600 {
				t.Errorf("socket mode %v, want 0600", st.Mode().Perm())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no socket after 60s:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	c, err := rpc.DialUnix(testCtx(t), sock, rpc.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	run := newRun(t, c, "", nil)
	if res := callTool(t, c, run, "test_echo", map[string]string{"text": "over unix"}); text(res) != "over unix" {
		t.Fatalf("got %+v", res)
	}
}

// /metrics serves the collectors the core and the first tool families
// feed; /healthz and /readyz answer.
func TestMetricsAndHealth(t *testing.T) {
	s := startServe(t, []string{testTools}, "--config", writeConfig(t, "vibe:\n  runners:\n    fast: [sleep, \"30\"]\n"))
	c := dial(t, s)
	run := newRun(t, c, "", map[string]bool{orchestrator.FeatureVibe: true, orchestrator.FeatureQuestions: true})
	callTool(t, c, run, "test_echo", map[string]string{"text": "x"})
	get := func(path string) (int, string) {
		resp, err := http.Get(s.HTTP() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// waitFor polls /metrics until it holds every line given.
	waitFor := func(what string, want ...string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			code, body := get("/metrics")
			if code != 200 {
				t.Fatalf("/metrics: %d", code)
			}
			var missing []string
			for _, w := range want {
				if !strings.Contains(body, w) {
					missing = append(missing, w)
				}
			}
			if len(missing) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: /metrics lacks %q", what, missing)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("after one call",
		"berth_runs_active 1",
		`berth_tool_calls_total{outcome="ok",tier="read",tool="test_echo"} 1`,
		`berth_tool_call_duration_seconds_count{tier="read",tool="test_echo"} 1`,
		"berth_build_info{",
		"berth_reaper_last_run_timestamp_seconds ",
		`berth_rpc_connections_active{transport="websocket"} 1`,
		"berth_questions_pending 0",
	)

	// A vibe worker is a live session of kind worker.
	if res := callTool(t, c, run, "vibe_spawn", map[string]string{"brief": "wait", "label": "sleeper"}); res.IsError {
		t.Fatalf("vibe_spawn: %+v", res)
	}
	waitFor("a running worker", `berth_sessions_active{driver="host",kind="worker"} 1`)

	// A card waiting for its human is pending until answered.
	asked, answer := make(chan struct{}), make(chan struct{})
	c.OnAsk(func(context.Context, rpc.AskParams) (*orchestrator.Answer, error) {
		close(asked)
		<-answer
		return &orchestrator.Answer{Outcome: "skipped"}, nil
	})
	done := make(chan *orchestrator.Result, 1)
	go func() {
		res, err := c.CallTool(testCtx(t), run, orchestrator.SurfaceFull, "ask_user", map[string]any{"question": "go on?", "allow_free_text": true})
		if err != nil {
			t.Errorf("ask_user: %v", err)
		}
		done <- res
	}()
	<-asked
	waitFor("a card waiting", "berth_questions_pending 1")
	close(answer)
	<-done
	waitFor("the card answered", "berth_questions_pending 0", `berth_tool_calls_total{outcome="ok",tier="read",tool="ask_user"} 1`)

	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("/readyz: %d", code)
	}
}

// writeConfig writes a configuration file and returns its path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "berth.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func mustString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// A stray print to stdout inside the server never reaches the protocol.
func TestStrayStdoutDoesNotCorruptStdio(t *testing.T) {
	c := startStdio(t, testTools)
	run := newRun(t, c, "", nil)
	if res := callTool(t, c, run, "test_stray", nil); text(res) != "printed" {
		t.Fatalf("got %+v", res)
	}
	if res := callTool(t, c, run, "test_echo", map[string]string{"text": "clean"}); text(res) != "clean" {
		t.Fatalf("after a stray print: %+v", res)
	}
}

// Over WebSocket too, a malformed message is answered and the connection
// stays usable.
func TestWebSocketBadMessagesKeepTheConnection(t *testing.T) {
	s := startServe(t, nil)
	ws, _, err := websocket.Dial(testCtx(t), s.URL(), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + s.Token}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	r := &rawStdio{t: t, f: rpc.NewWebSocketFramer(ws, 0)}
	for _, c := range []struct {
		send string
		code int64
	}{
		{`{"jsonrpc":"2.0","id":1,`, -32700},
		{`{"jsonrpc":"2.0","id":2}`, -32600},
		{`{"jsonrpc":"2.0","id":3,"method":"nope"}`, -32601},
		{`{"jsonrpc":"2.0","id":4,"method":"run/start","params":{}}`, -32602},
	} {
		r.send(c.send)
		if code, msg := replyError(r.recv()); code != c.code {
			t.Errorf("%s: got %d %q, want %d", c.send, code, msg, c.code)
		}
		r.send(`{"jsonrpc":"2.0","id":"ok","method":"initialize","params":{"client":{"name":"x"}}}`)
		if m := r.recv(); m["id"] != "ok" || m["result"] == nil {
			t.Fatalf("after %s: %v", c.send, m)
		}
	}
}
