package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/internal/errclass"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

// askTool asks the harness and returns the answer's text.
type askTool struct{}

func (askTool) Spec() orchestrator.Spec {
	return orchestrator.Spec{Name: "asker", Tier: orchestrator.Read, InputSchema: json.RawMessage(`{"type":"object","additionalProperties":false}`), ParallelSafe: true}
}

func (askTool) Call(ctx context.Context, run *orchestrator.Run, _ json.RawMessage) (*orchestrator.Result, error) {
	a, err := run.Harness.Ask(ctx, orchestrator.Question{Number: 1, Question: "ok?", Timeout: time.Minute})
	if err != nil {
		return orchestrator.Errorf("%v", err), nil
	}
	return orchestrator.Text(a.Outcome + ":" + a.Text), nil
}

type provider struct{}

func (provider) Feature() string                             { return orchestrator.FeatureStructural }
func (provider) Tools(*orchestrator.Run) []orchestrator.Tool { return []orchestrator.Tool{askTool{}} }

func newServer(t *testing.T, grace time.Duration) *Server {
	t.Helper()
	m := metrics.NewForTest()
	reg := orchestrator.NewRegistry(m, 0)
	reg.Add(provider{})
	s := &Server{Registry: reg, Runs: orchestrator.NewRuns(m, 0, hostOnly()), Metrics: m, Version: "test", DisconnectGrace: grace}
	t.Cleanup(func() {
		s.Close()
		s.Runs.StopAll()
	})
	return s
}

// startRun starts a run in a fresh directory.
func startRun(t *testing.T, c *Client) *StartRunResult {
	t.Helper()
	run, err := c.StartRun(context.Background(), StartRunParams{Workdir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// connect joins an in-process client to s; cleanup closes it and waits
// for the server side to finish.
func connect(t *testing.T, s *Server) *Client {
	t.Helper()
	a, b := net.Pipe()
	var wg sync.WaitGroup
	wg.Go(func() { s.ServeConn(NewStreamFramer(a, a, a, 0), "test") })
	c := Dial(b, ClientOptions{})
	t.Cleanup(func() {
		_ = c.Close()
		wg.Wait()
	})
	return c
}

func TestBadParamsNameTheField(t *testing.T) {
	s := newServer(t, 0)
	c := connect(t, s)
	ctx := context.Background()
	run := startRun(t, c)
	cases := []struct {
		method string
		params any
		code   int64
		want   string
	}{
		{"run/start", map[string]any{}, CodeInvalidParams, `run/start needs "workdir" (the run's working directory, an absolute path)`},
		{"run/start", map[string]any{"workdir": 3}, CodeInvalidParams, `"workdir" must be a string, not a number`},
		{"run/start", map[string]any{"workdir": "/tmp", "colour": "red"}, CodeInvalidParams, `run/start does not take "colour" (it takes only "conversationId", "enclosure", "features", "runId", "workdir")`},
		{"run/start", map[string]any{"workdir": "relative"}, CodeInvalidParams, "not absolute"},
		{"run/start", map[string]any{"workdir": "/tmp", "enclosure": 5}, CodeInvalidParams, `"enclosure" must be a string or an object, not a number`},
		{"run/start", map[string]any{"workdir": "/tmp", "enclosure": "docker"}, CodeInvalidParams, `unknown enclosure driver "docker": use one of "host", "auto"`}, // this server has the host alone
		{"run/start", map[string]any{"workdir": "/tmp", "features": map[string]bool{"telepathy": true}}, CodeInvalidParams, `unknown feature "telepathy"`},
		{"run/start", []int{1}, CodeInvalidParams, "must be a JSON object of named fields"},
		{"tools/list", map[string]any{"runId": run.RunID, "surface": "admin"}, CodeInvalidParams, `field "surface": unknown surface "admin"`},
		{"tools/call", map[string]any{"runId": run.RunID}, CodeInvalidParams, `tools/call needs "name"`},
		{"run/update", map[string]any{"runId": run.RunID, "features": map[string]bool{"x": true}}, CodeInvalidParams, `unknown feature "x"`},
		{"run/start", map[string]any{"workdir": nil}, CodeInvalidParams, `"workdir" must be a string, not null`},
		{"run/start", map[string]any{"workdir": ""}, CodeInvalidParams, `"workdir" must not be empty`},
		{"files/didWrite", map[string]any{"runId": run.RunID, "paths": []string{}}, CodeInvalidParams, `"paths" must have at least 1 item(s)`},
		{"files/willWrite", map[string]any{"runId": run.RunID, "paths": []string{"a.go", ""}}, CodeInvalidParams, `"paths.1" must not be empty`},
		{"files/didWrite", map[string]any{"runId": run.RunID}, CodeInvalidParams, `files/didWrite needs "paths"`},
		{"run/update", map[string]any{"runId": run.RunID}, CodeInvalidParams, `run/update needs "features"`},
		{"run/update", map[string]any{"runId": run.RunID, "features": nil}, CodeInvalidParams, `"features" must be an object, not null`},
		{"files/didWrite", map[string]any{"runId": run.RunID, "paths": "a.go"}, CodeInvalidParams, `"paths" must be an array, not a string`},
		// The library passes params on unread: the schema's reading refuses them.
		{"run/stop", json.RawMessage(`{"runId":}`), CodeInvalidParams, "invalid params for run/stop: arguments are not valid JSON"},
		{"tools/list", map[string]any{"runId": "run_nope"}, CodeUnknownRun, `unknown run "run_nope"`},
		{"nosuch/method", map[string]any{}, CodeMethodNotFound, `"nosuch/method"`},
	}
	for _, tc := range cases {
		err := c.Call(ctx, tc.method, tc.params, nil)
		var e *Error
		if !errors.As(err, &e) || e.Code != tc.code || !strings.Contains(e.Message, tc.want) {
			t.Errorf("%s %v: got %v, want code %d with %q", tc.method, tc.params, err, tc.code, tc.want)
		}
	}
}

func TestRunsBelongToTheirConnection(t *testing.T) {
	s := newServer(t, 0)
	a, b := connect(t, s), connect(t, s)
	ctx := context.Background()
	run := startRun(t, a)
	if _, err := b.ListTools(ctx, run.RunID, orchestrator.SurfaceFull); rpcCodeOf(err) != CodeUnknownRun {
		t.Fatalf("another connection's tools/list: %v, want unknown run", err)
	}
	if err := b.StopRun(ctx, run.RunID); rpcCodeOf(err) != CodeUnknownRun {
		t.Fatalf("another connection's run/stop: %v, want unknown run", err)
	}
	if _, err := a.ListTools(ctx, run.RunID, orchestrator.SurfaceFull); err != nil {
		t.Fatalf("the owner's tools/list: %v", err)
	}
}

func rpcCodeOf(err error) int64 {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

func TestAskReachesTheHarnessAndCarriesItsRefusal(t *testing.T) {
	s := newServer(t, 0)
	c := connect(t, s)
	ctx := context.Background()
	run := startRun(t, c)
	var got AskParams
	c.OnAsk(func(_ context.Context, p AskParams) (*orchestrator.Answer, error) {
		got = p
		return &orchestrator.Answer{Outcome: "answered", Text: "yes"}, nil
	})
	res, err := c.CallTool(ctx, run.RunID, "", "asker", nil)
	if err != nil || res.FirstText() != "answered:yes" {
		t.Fatalf("got %+v, %v", res, err)
	}
	if got.RunID != run.RunID || got.Card.Question != "ok?" || got.TimeoutSeconds != 60 {
		t.Fatalf("harness/ask params: %+v", got)
	}
	c.OnAsk(func(context.Context, AskParams) (*orchestrator.Answer, error) {
		return nil, errors.New("no human is connected to this conversation")
	})
	res, err = c.CallTool(ctx, run.RunID, "", "asker", nil)
	if err != nil || !res.IsError || res.FirstText() != "no human is connected to this conversation" {
		t.Fatalf("got %+v, %v", res, err)
	}
}

func TestClosedConnectionEndsItsRunsAfterTheGrace(t *testing.T) {
	s := newServer(t, 100*time.Millisecond)
	a, b := net.Pipe()
	done := make(chan struct{})
	go func() { s.ServeConn(NewStreamFramer(a, a, a, 0), "test"); close(done) }()
	c := Dial(b, ClientOptions{})
	if _, err := c.StartRun(context.Background(), StartRunParams{Workdir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	<-done
	if n := s.Runs.Len(); n != 1 {
		t.Fatalf("%d runs right after the close, want 1 (the grace has not passed)", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.Runs.Len() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the run outlived its connection's grace")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestDidWriteWithoutAnObserverIsUnknown(t *testing.T) {
	s := newServer(t, 0)
	c := connect(t, s)
	ctx := context.Background()
	run := startRun(t, c)
	if err := c.WillWrite(ctx, run.RunID, []string{"a.go"}); err != nil {
		t.Fatal(err)
	}
	rep, err := c.DidWrite(ctx, run.RunID, []string{"a.go"})
	if err != nil || rep.State != orchestrator.WriteUnknown || rep.Diagnostics == nil || !strings.Contains(rep.Text, "no language-server support") {
		t.Fatalf("got %+v, %v", rep, err)
	}
}

func TestWebSocketNeedsTheTokenAndSkipsOversizedMessages(t *testing.T) {
	s := newServer(t, 0)
	s.MaxMessageSize = 1024
	hs := httptest.NewServer(s.HTTPHandler(HTTPOptions{Token: "sesame", Transport: "websocket"}))
	defer hs.Close()
	url := "ws" + strings.TrimPrefix(hs.URL, "http") + RPCPath
	ctx := context.Background()
	for _, token := range []string{"", "wrong"} {
		_, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
		if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("token %q: got %v, want 401", token, err)
		}
	}
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer sesame"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	p := &rawPeer{t: t, f: NewWebSocketFramer(ws, 0)}
	p.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"client":{"name":"` + strings.Repeat("x", 2000) + `"}}}`)
	if m := p.recv(); errCode(m) != CodeInvalidRequest || !strings.Contains(errMessage(m), "exceeds the limit of 1024 bytes") {
		t.Fatalf("oversized message: got %v", m)
	}
	p.send(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"client":{"name":"h"}}}`)
	if m := p.recv(); m["id"] != 2.0 || m["result"] == nil {
		t.Fatalf("after an oversized message: %v", m)
	}
}

func TestCoreErrorsMapToCodes(t *testing.T) {
	cases := []struct {
		err   error
		code  int64
		msg   string
		class errclass.Class
	}{
		{fmt.Errorf("unknown run %q: start one: %w", "r1", orchestrator.ErrUnknownRun), CodeUnknownRun, `unknown run "r1": start one`, errclass.NotFound},
		{fmt.Errorf("workdir is required: %w", orchestrator.ErrInvalid), CodeInvalidParams, "workdir is required", errclass.Invalid},
		{fmt.Errorf("run r1 has ended: %w", orchestrator.ErrRunEnded), CodeRunEnded, "run r1 has ended", errclass.Gone},
		{fmt.Errorf("no docker: %w", orchestrator.ErrUnavailable), CodeUnavailable, "no docker", errclass.Unavailable},
		// issue 24 item 13: an engine that did not answer is unavailable.
		{fmt.Errorf("docker engine did not answer: %w", enclosure.ErrUnavailable), CodeUnavailable, "docker engine did not answer", errclass.Unavailable},
		// issue 27 item 3: a stopped or removed container at run/start
		// is gone (it was invalid params), a paused one unavailable.
		{fmt.Errorf("enclosure: %w", fmt.Errorf("docker container web is exited, not running: start it (docker start web) and start a new run: %w", enclosure.ErrGone)), CodeGone, "enclosure: docker container web is exited, not running: start it (docker start web) and start a new run", errclass.Gone},
		{fmt.Errorf("enclosure: %w", fmt.Errorf("docker container web is paused: unpause it: %w", enclosure.ErrPaused)), CodeUnavailable, "enclosure: docker container web is paused: unpause it", errclass.Unavailable},
		{fmt.Errorf("run \"a\" already exists: stop it first: %w", errclass.ErrConflict), CodeConflict, `run "a" already exists: stop it first`, errclass.Conflict},
		// A bare class says what to do.
		{orchestrator.ErrRunEnded, CodeGone, "run ended: " + Advice(errclass.Gone), errclass.Gone},
		{fmt.Errorf("waiting: %w", context.DeadlineExceeded), CodeTimeout, "waiting: context deadline exceeded", errclass.Timeout},
		{errors.New("disk on fire"), CodeInternalError, "internal error: disk on fire", ""},
	}
	for _, c := range cases {
		var e *Error
		if !errors.As(toError(c.err), &e) || e.Code != c.code || e.Message != c.msg {
			t.Errorf("%v: got %+v, want %d %q", c.err, e, c.code, c.msg)
			continue
		}
		var d ErrorData
		if err := json.Unmarshal(e.Data, &d); err != nil || d.Class != c.class || d.Advice != Advice(c.class) || e.ClassOf() != c.class {
			t.Errorf("%v: data %s, want class %q and its advice", c.err, e.Data, c.class)
		}
	}
}

// Every class has its own code and a next step; no two share a code.
func TestEveryClassHasACodeAndAdvice(t *testing.T) {
	seen := map[int64]errclass.Class{}
	for _, c := range errclass.All {
		code := codeOf(c)
		if code == CodeInternalError || Advice(c) == internalAdvice || Advice(c) == "" {
			t.Errorf("class %q has no code or no advice", c)
		}
		if other, dup := seen[code]; dup {
			t.Errorf("classes %q and %q share code %d", c, other, code)
		}
		seen[code] = c
		if e := toError(fmt.Errorf("x: %w", c.Sentinel())).(*Error); e.Code != code {
			t.Errorf("class %q maps to %d, want %d", c, e.Code, code)
		}
	}
}

func TestAuthorizedNeedsTheExactToken(t *testing.T) {
	for _, c := range []struct {
		header string
		ok     bool
	}{
		{"Bearer sesame", true},
		{"bearer sesame", true},
		{"Bearer  sesame ", true},
		{"Bearer sesam", false},
		{"Bearer sesame2", false},
		{"Basic sesame", false},
		{"sesame", false},
		{"", false},
	} {
		r := httptest.NewRequest("GET", RPCPath, nil)
		if c.header != "" {
			r.Header.Set("Authorization", c.header)
		}
		if got := authorized(r, "sesame"); got != c.ok {
			t.Errorf("Authorization %q: authorized = %v, want %v", c.header, got, c.ok)
		}
	}
}

// silentObserver hears writes and reports nothing.
type silentObserver struct{}

func (silentObserver) WillWrite(context.Context, *orchestrator.Run, []string) error { return nil }
func (silentObserver) DidWrite(context.Context, *orchestrator.Run, []string) (*orchestrator.WriteReport, error) {
	return nil, nil
}

// An observer that gives no report leaves the write unknown, never clean.
func TestDidWriteWithNoReportIsUnknown(t *testing.T) {
	s := newServer(t, 0)
	s.Registry.SetWriteObserver(silentObserver{})
	c := connect(t, s)
	run := startRun(t, c)
	rep, err := c.DidWrite(context.Background(), run.RunID, []string{"a.go"})
	if err != nil || rep.State != orchestrator.WriteUnknown || rep.Diagnostics == nil || rep.Text == "" {
		t.Fatalf("got %+v, %v", rep, err)
	}
}

// failTool fails with the class its arguments name: as a Go error
// ("error") or as an error result built from one ("result").
type failTool struct{}

func (failTool) Spec() orchestrator.Spec {
	return orchestrator.Spec{Name: "fail", Tier: orchestrator.Read, ParallelSafe: true,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"class":{"type":"string"},"as":{"type":"string"}},"required":["class","as"],"additionalProperties":false}`)}
}

func (failTool) Call(_ context.Context, _ *orchestrator.Run, raw json.RawMessage) (*orchestrator.Result, error) {
	var a struct{ Class, As string }
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, err
	}
	err := fmt.Errorf("the widget failed: fix the widget: %w", errclass.Class(a.Class).Sentinel())
	if a.As == "result" {
		return orchestrator.Errorf("fail: %v", err), nil
	}
	return nil, err
}

type failProvider struct{}

func (failProvider) Feature() string { return orchestrator.FeatureStructural }
func (failProvider) Tools(*orchestrator.Run) []orchestrator.Tool {
	return []orchestrator.Tool{failTool{}}
}

// The one mapping, class by class, on the wire: a core error of the class
// is a JSON-RPC error with the class's code and {class, advice} as data;
// a tool's failure of the class is an isError result whose errorClass
// names it, never a JSON-RPC error, and whose text lacks the class words.
//
// Issue 27 item 3.
func TestEachClassMapsToItsCodeAndErrorClass(t *testing.T) {
	table := []struct {
		class errclass.Class
		code  int64
	}{
		{errclass.Invalid, -32602},
		{errclass.NotFound, -32001},
		{errclass.Gone, -32002},
		{errclass.Unavailable, -32003},
		{errclass.Conflict, -32004},
		{errclass.Permission, -32005},
		{errclass.Timeout, -32006},
		{errclass.Restarting, -32007},
		{errclass.OutcomeUnknown, -32008},
		{errclass.Canceled, -32800},
	}
	if len(table) != len(errclass.All) {
		t.Fatalf("the table has %d classes, errclass.All %d: add the new class here and to docs/protocol.md", len(table), len(errclass.All))
	}
	s := newServer(t, 0)
	s.Registry.Add(failProvider{})
	c := connect(t, s)
	ctx := context.Background()
	run := startRun(t, c)
	for _, tc := range table {
		e := toError(fmt.Errorf("the widget failed: %w", tc.class.Sentinel())).(*Error)
		var d ErrorData
		if e.Code != tc.code || json.Unmarshal(e.Data, &d) != nil || d.Class != tc.class || d.Advice == "" || e.Message != "the widget failed" {
			t.Errorf("%s: JSON-RPC error %d %q data %s; want %d \"the widget failed\" with class %q and advice", tc.class, e.Code, e.Message, e.Data, tc.code, tc.class)
		}
		for _, as := range []string{"error", "result"} {
			res, err := c.CallTool(ctx, run.RunID, orchestrator.SurfaceFull, "fail", map[string]string{"class": string(tc.class), "as": as})
			if err != nil {
				t.Errorf("%s as %s: a JSON-RPC error instead of an isError result: %v", tc.class, as, err)
				continue
			}
			if !res.IsError || res.ErrorClass != tc.class || !strings.HasSuffix(res.FirstText(), "fix the widget") {
				t.Errorf("%s as %s: isError %v errorClass %q text %q; want isError, errorClass %q, text ending \"fix the widget\"", tc.class, as, res.IsError, res.ErrorClass, res.FirstText(), tc.class)
			}
		}
	}
	// A failure of no class has no errorClass: the field is left out.
	raw, err := json.Marshal(orchestrator.Errorf("the cell raised"))
	if err != nil || strings.Contains(string(raw), "errorClass") {
		t.Errorf("an error result of no class: %s (%v); want no errorClass", raw, err)
	}
	// Protocol-level refusals stay JSON-RPC errors, with their class.
	_, err = c.ListTools(ctx, "run_nope", orchestrator.SurfaceFull)
	var pe *Error
	if !errors.As(err, &pe) || pe.Code != CodeUnknownRun || pe.ClassOf() != errclass.NotFound {
		t.Errorf("an unknown run: %v; want %d with class not_found", err, CodeUnknownRun)
	}
	_, err = c.CallTool(ctx, run.RunID, orchestrator.Surface("admin"), "fail", map[string]string{})
	if !errors.As(err, &pe) || pe.Code != CodeInvalidParams || pe.ClassOf() != errclass.Invalid {
		t.Errorf("a bad surface: %v; want %d with class invalid", err, CodeInvalidParams)
	}
}

// hostOnly is the lookup of a Berth with the host enclosure alone.
func hostOnly() *enclosure.Lookup { return &enclosure.Lookup{Host: host.New()} }
