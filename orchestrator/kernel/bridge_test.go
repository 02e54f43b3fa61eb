package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/berth-dev/berth/orchestrator"
)

// echoHarness answers "read" with the path it was given, refuses "rm"
// with a Go error and fails "fail" with an error result.
func echoHarness() *testHarness {
	return &testHarness{answer: func(_ context.Context, c orchestrator.ToolCall) (*orchestrator.Result, error) {
		var a struct {
			Path string `json:"path"`
		}
		_ = json.Unmarshal(c.Arguments, &a)
		switch c.Name {
		case "read":
			return orchestrator.Textf("contents of %s", a.Path), nil
		case "rm":
			return nil, errors.New("the harness refused rm: not allowed from a cell")
		case "panic":
			panic("harness bug")
		}
		return orchestrator.Errorf("no such tool %q", c.Name), nil
	}}
}

func TestToolFromCell(t *testing.T) {
	h := echoHarness()
	e := newEnv(t, testConfig(), h)
	tests := []struct {
		name, code, lang string
		want             string
		isError          bool
	}{
		{"python answered", `tool("read", {"path": "lib/auth.dart"})`, Python, "'contents of lib/auth.dart'", false},
		{"python refused", `tool("rm", {"path": "x"})`, Python, "ToolError: rm: the harness refused rm", true},
		{"python error result", `tool("fail")`, Python, `ToolError: fail: no such tool "fail"`, true},
		{"python refusal caught", "try:\n    tool('rm')\nexcept ToolError as e:\n    print('caught', e)", Python, "caught rm: the harness refused", false},
		{"python harness panics", `tool("panic")`, Python, "ToolError: panic: the harness connection failed internally (harness bug)", true},
		{"python bad arguments", `tool("read", [1])`, Python, "TypeError", true},
		{"javascript answered", `await tool("read", {path: "a.js"})`, JavaScript, "contents of a.js", false},
		{"javascript refused", `await tool("rm", {})`, JavaScript, "ToolError: rm: the harness refused", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opt := func(map[string]any) {}
			if tt.lang == JavaScript {
				opt = js
			}
			r := e.eval(tt.code, opt)
			if r.IsError != tt.isError || !strings.Contains(text(r), tt.want) {
				t.Errorf("isError %v (want %v), want %q in:\n%s", r.IsError, tt.isError, tt.want, text(r))
			}
		})
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.calls) == 0 || h.calls[0].Origin.Tool != "eval" || h.calls[0].Origin.Cell == "" || h.calls[0].Name != "read" {
		t.Errorf("the harness saw %+v, want read with origin eval and a cell id", h.calls)
	}
}

// TestToolCallsInFlight: several calls from one cell are in flight at
// once (threads in Python, Promise.all in JavaScript); the harness holds
// them all until the last arrives, so they cannot have been serialised.
func TestToolCallsInFlight(t *testing.T) {
	for _, lang := range []string{Python, JavaScript} {
		t.Run(lang, func(t *testing.T) {
			const n = 3
			var mu sync.Mutex
			arrived := 0
			all := make(chan struct{})
			var e *env
			var inFlight float64
			h := &testHarness{answer: func(ctx context.Context, c orchestrator.ToolCall) (*orchestrator.Result, error) {
				mu.Lock()
				arrived++
				if arrived == n {
					inFlight = testutil.ToFloat64(e.reg.Metrics().BridgeCallsInFlight)
					close(all)
				}
				mu.Unlock()
				select {
				case <-all:
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(10 * time.Second):
					return nil, errors.New("the calls were not concurrent")
				}
				return orchestrator.Text(c.Name), nil
			}}
			e = newEnv(t, testConfig(), h)
			code := "from concurrent.futures import ThreadPoolExecutor\nwith ThreadPoolExecutor(3) as ex:\n    got = sorted(ex.map(lambda i: tool('t%d' % i), range(3)))\ngot"
			opt := func(map[string]any) {}
			if lang == JavaScript {
				code, opt = "(await Promise.all([0, 1, 2].map(i => tool('t' + i)))).join(',')", js
			}
			got := mustOK(t, e.eval(code, opt))
			if !strings.Contains(got, "t0") || !strings.Contains(got, "t2") {
				t.Errorf("answers: %s", got)
			}
			if inFlight != n {
				t.Errorf("berth_bridge_calls_in_flight was %v with all calls waiting, want %d", inFlight, n)
			}
			if v := testutil.ToFloat64(e.reg.Metrics().BridgeCallsInFlight); v != 0 {
				t.Errorf("berth_bridge_calls_in_flight = %v after the cell, want 0", v)
			}
		})
	}
}

// TestIdleBudget: a tool() call longer than the budget does not count
// against it; a silent cell is interrupted and its kernel survives; a
// cell that ignores the interrupt gets its kernel killed after the grace.
func TestIdleBudget(t *testing.T) {
	cfg := testConfig()
	cfg.CellIdleBudget = time.Second
	cfg.InterruptGrace = time.Second
	h := &testHarness{answer: func(ctx context.Context, c orchestrator.ToolCall) (*orchestrator.Result, error) {
		select {
		case <-time.After(2500 * time.Millisecond):
			return orchestrator.Text("slow answer"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
	e := newEnv(t, cfg, h)
	mustOK(t, e.eval("kept = 'yes'"))

	if got := mustOK(t, e.eval("tool('subagent', {})")); !strings.Contains(got, "slow answer") {
		t.Fatalf("a pending tool() call counted against the budget: %s", got)
	}
	if got := mustOK(t, e.eval("import time\nfor i in range(3):\n    print('tick', flush=True)\n    time.sleep(0.3)\n'steady'")); !strings.Contains(got, "'steady'") {
		t.Fatalf("output did not reset the budget: %s", got)
	}

	r := e.eval("import time\nwhile True:\n    time.sleep(0.05)")
	if !r.IsError || !strings.Contains(text(r), "KeyboardInterrupt") || !strings.Contains(text(r), "no output for 1s") || !strings.Contains(text(r), "intact") {
		t.Fatalf("silent loop:\n%s", text(r))
	}
	if got := mustOK(t, e.eval("kept")); got != "'yes'" {
		t.Fatalf("kernel lost its state after an interrupt: %s", got)
	}

	r = e.eval("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.05)")
	if !r.IsError || !strings.Contains(text(r), "was killed") || !strings.Contains(text(r), "state (variables, imports) is lost") {
		t.Fatalf("cell ignoring the interrupt:\n%s", text(r))
	}
	if got := mustOK(t, e.eval("'kept' in globals()")); got != "False" {
		t.Fatalf("the killed kernel answered again: %s", got)
	}
}

// TestCancelledCall: a cell whose caller gives up is interrupted too.
func TestCancelledCall(t *testing.T) {
	e := newEnv(t, testConfig(), nil)
	mustOK(t, e.eval("kept = 1"))
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	r := e.evalCtx(ctx, "import time\ntime.sleep(60)")
	if time.Since(start) > 5*time.Second {
		t.Fatalf("cancelled cell ran for %s", time.Since(start))
	}
	if !r.IsError || !strings.Contains(text(r), "KeyboardInterrupt") {
		t.Fatalf("cancelled cell:\n%s", text(r))
	}
	if got := mustOK(t, e.eval("kept")); got != "1" {
		t.Fatalf("state after a cancelled cell: %s", got)
	}
}
