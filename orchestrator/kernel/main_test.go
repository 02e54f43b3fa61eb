package kernel

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/procfs"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

func TestMain(m *testing.M) { relaytest.Main(m) }

// systemPython is Debian's interpreter, the one with pandas and
// matplotlib; the python3 first on PATH here is another.
const systemPython = "/usr/bin/python3"

// testHarness stands in for the harness connection: it answers tool()
// calls with answer, and records them.
type testHarness struct {
	answer func(ctx context.Context, call orchestrator.ToolCall) (*orchestrator.Result, error)

	mu    sync.Mutex
	calls []orchestrator.ToolCall
}

func (h *testHarness) CallTool(ctx context.Context, call orchestrator.ToolCall) (json.RawMessage, error) {
	h.mu.Lock()
	h.calls = append(h.calls, call)
	h.mu.Unlock()
	if h.answer == nil {
		return nil, context.Canceled
	}
	res, err := h.answer(ctx, call)
	if err != nil || res == nil {
		return nil, err
	}
	return json.Marshal(res)
}

func (h *testHarness) Ask(context.Context, orchestrator.Question) (*orchestrator.Answer, error) {
	return nil, orchestrator.ErrUnavailable
}

// env is one run with eval registered, through a real Registry so
// dispatch's validation applies.
type env struct {
	t   *testing.T
	reg *orchestrator.Registry
	run *orchestrator.Run
	dir string
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.Python = systemPython
	return cfg
}

func newEnv(t *testing.T, cfg Config, h orchestrator.Harness) *env {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return newEnvIn(t, cfg, h, dir)
}

func newEnvIn(t *testing.T, cfg Config, h orchestrator.Harness, dir string) *env {
	t.Helper()
	return newEnvOn(t, cfg, h, dir, host.New())
}

// newEnvOn is newEnvIn in the enclosure enc.
func newEnvOn(t *testing.T, cfg Config, h orchestrator.Harness, dir string, enc enclosure.Enclosure) *env {
	t.Helper()
	if h == nil {
		h = &testHarness{}
	}
	reg := orchestrator.NewRegistry(metrics.NewForTest(), 0)
	reg.Add(New(cfg, reg.Metrics()))
	run := orchestrator.NewRun("run-"+t.Name(), "conv", dir, enc, h, nil)
	t.Cleanup(func() { run.End(orchestrator.EndStopped) })
	return &env{t: t, reg: reg, run: run, dir: dir}
}

// eval runs a cell and returns the result.
func (e *env) eval(code string, opts ...func(map[string]any)) *orchestrator.Result {
	e.t.Helper()
	return e.evalCtx(context.Background(), code, opts...)
}

func (e *env) evalCtx(ctx context.Context, code string, opts ...func(map[string]any)) *orchestrator.Result {
	e.t.Helper()
	args := map[string]any{"code": code, "description": "run a small test cell here"}
	for _, o := range opts {
		o(args)
	}
	raw, _ := json.Marshal(args)
	res, err := e.reg.Call(ctx, e.run, orchestrator.SurfaceFull, "eval", raw)
	if err != nil {
		e.t.Fatalf("eval %q: %v", code, err)
	}
	return res
}

func js(a map[string]any)    { a["language"] = "javascript" }
func reset(a map[string]any) { a["reset"] = true }

// text is every text block (and table fallback) joined.
func text(r *orchestrator.Result) string {
	var parts []string
	for _, b := range r.Content {
		if b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func blocks(r *orchestrator.Result, typ string) []orchestrator.Block {
	var out []orchestrator.Block
	for _, b := range r.Content {
		if b.Type == typ {
			out = append(out, b)
		}
	}
	return out
}

// checkResult checks a cell's result: its error flag, the texts it must
// and must not hold. It returns the text.
func checkResult(t *testing.T, r *orchestrator.Result, isError bool, want, notWant []string) string {
	t.Helper()
	got := text(r)
	if r.IsError != isError {
		t.Fatalf("isError = %v, want %v; result:\n%s", r.IsError, isError, got)
	}
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("result lacks %q; got:\n%s", w, got)
		}
	}
	for _, w := range notWant {
		if strings.Contains(got, w) {
			t.Errorf("result has %q; got:\n%s", w, got)
		}
	}
	return got
}

func mustOK(t *testing.T, r *orchestrator.Result) string {
	t.Helper()
	if r.IsError {
		t.Fatalf("unexpected error result:\n%s", text(r))
	}
	return text(r)
}

// pidOf asks the kernel its own process id.
func (e *env) pidOf(lang string) int {
	e.t.Helper()
	code, opt := "import os; os.getpid()", func(map[string]any) {}
	if lang == JavaScript {
		code, opt = "process.pid", js
	}
	var pid int
	if err := json.Unmarshal([]byte(mustOK(e.t, e.eval(code, opt))), &pid); err != nil || pid <= 0 {
		e.t.Fatalf("no pid from the %s kernel: %v", lang, err)
	}
	return pid
}

// waitSeenExit waits until the enclosure has seen the live kernel of lang
// exit, as a later call would.
func (e *env) waitSeenExit(lang string) {
	e.t.Helper()
	ks := kernelsOf(e.run, Config{}, nil)
	ks.mu.Lock()
	s, ok := ks.live[lang]
	ks.mu.Unlock()
	if !ok {
		e.t.Fatalf("no live %s kernel", lang)
	}
	select {
	case <-s.k.proc.Done():
	case <-time.After(10 * time.Second):
		e.t.Fatalf("the %s kernel has not exited", lang)
	}
}

// waitGone waits until no process with pid exists.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, exists := procfs.Read(pid); !exists {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("process %d is still there", pid)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
