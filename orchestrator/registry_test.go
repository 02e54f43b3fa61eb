package orchestrator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/internal/errclass"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeTool is a configurable tool for dispatch tests.
type fakeTool struct {
	spec orchestrator.Spec
	call func(ctx context.Context, args json.RawMessage) (*orchestrator.Result, error)
}

func (f fakeTool) Spec() orchestrator.Spec { return f.spec }
func (f fakeTool) Call(ctx context.Context, _ *orchestrator.Run, args json.RawMessage) (*orchestrator.Result, error) {
	return f.call(ctx, args)
}

type provider struct {
	feature string
	tools   []orchestrator.Tool
}

func (p provider) Feature() string                             { return p.feature }
func (p provider) Tools(*orchestrator.Run) []orchestrator.Tool { return p.tools }

const echoSchema = `{"type":"object","properties":{"text":{"type":"string"},"n":{"type":"integer"}},"required":["text"],"additionalProperties":false}`

func echo(name string, tier orchestrator.Tier) orchestrator.Tool {
	return fakeTool{
		spec: orchestrator.Spec{Name: name, Tier: tier, InputSchema: json.RawMessage(echoSchema), ParallelSafe: true},
		call: func(_ context.Context, args json.RawMessage) (*orchestrator.Result, error) {
			return orchestrator.Text(string(args)), nil
		},
	}
}

func newRegistry(t *testing.T, ps ...orchestrator.Provider) (*orchestrator.Registry, *orchestrator.Run) {
	t.Helper()
	reg := orchestrator.NewRegistry(metrics.NewForTest(), time.Minute)
	for _, p := range ps {
		reg.Add(p)
	}
	run := orchestrator.NewRun("r1", "c1", t.TempDir(), host.New(), nil, nil)
	t.Cleanup(func() { run.End("test") })
	return reg, run
}

func names(specs []orchestrator.Spec) string {
	var n []string
	for _, s := range specs {
		n = append(n, s.Name)
	}
	return strings.Join(n, ",")
}

func TestSurfacesListAndRefuseByTier(t *testing.T) {
	reg, run := newRegistry(t, provider{orchestrator.FeatureStructural, []orchestrator.Tool{
		echo("r", orchestrator.Read), echo("w", orchestrator.Write), echo("x", orchestrator.Exec),
	}})
	for _, tc := range []struct {
		surface orchestrator.Surface
		want    string
	}{
		{orchestrator.SurfaceFull, "r,w,x"},
		{orchestrator.SurfacePlan, "r"},
		{orchestrator.SurfaceReadonly, "r"},
	} {
		if got := names(reg.List(run, tc.surface)); got != tc.want {
			t.Errorf("%s lists %q, want %q", tc.surface, got, tc.want)
		}
	}
	for _, s := range []orchestrator.Surface{orchestrator.SurfacePlan, orchestrator.SurfaceReadonly} {
		for _, name := range []string{"w", "x"} {
			res, err := reg.Call(context.Background(), run, s, name, json.RawMessage(`{"text":"hi"}`))
			if err != nil || !res.IsError || !strings.Contains(res.FirstText(), "not allowed on the "+string(s)) {
				t.Errorf("%s on %s: %+v %v, want a refusal", name, s, res, err)
			}
		}
	}
	res, err := reg.Call(context.Background(), run, orchestrator.SurfaceFull, "x", json.RawMessage(`{"text":"hi"}`))
	if err != nil || res.IsError {
		t.Fatalf("x on full: %+v %v", res, err)
	}
}

func TestFeatureGatesTools(t *testing.T) {
	reg, run := newRegistry(t, provider{orchestrator.FeatureVibe, []orchestrator.Tool{echo("vibe_list", orchestrator.Read)}})
	if got := names(reg.List(run, orchestrator.SurfaceFull)); got != "" {
		t.Fatalf("vibe off lists %q", got)
	}
	res, _ := reg.Call(context.Background(), run, orchestrator.SurfaceFull, "vibe_list", json.RawMessage(`{"text":"a"}`))
	if !res.IsError || !strings.Contains(res.FirstText(), `feature "vibe" is off`) {
		t.Fatalf("call with feature off: %q", res.FirstText())
	}
	run.SetFeatures(map[string]bool{orchestrator.FeatureVibe: true})
	if got := names(reg.List(run, orchestrator.SurfaceFull)); got != "vibe_list" {
		t.Fatalf("vibe on lists %q", got)
	}
}

func TestArgumentValidationNamesTheField(t *testing.T) {
	reg, run := newRegistry(t, provider{orchestrator.FeatureStructural, []orchestrator.Tool{echo("e", orchestrator.Read)}})
	for _, tc := range []struct{ args, want string }{
		{`{}`, "text"},
		{`{"text":"a","bogus":1}`, "bogus"},
		{`{"text":5}`, `"text"`},
		{`{"text":"a","n":"x"}`, `"n"`},
		{`[1]`, "JSON object"},
		{`{"text":`, "not valid JSON"},
	} {
		res, err := reg.Call(context.Background(), run, orchestrator.SurfaceFull, "e", json.RawMessage(tc.args))
		if err != nil {
			t.Fatalf("%s: %v", tc.args, err)
		}
		if !res.IsError || !strings.Contains(res.FirstText(), tc.want) {
			t.Errorf("%s: %q, want an error naming %s", tc.args, res.FirstText(), tc.want)
		}
	}
	res, _ := reg.Call(context.Background(), run, orchestrator.SurfaceFull, "nope", nil)
	if !res.IsError || !strings.Contains(res.FirstText(), "unknown tool") || !strings.Contains(res.FirstText(), "e") {
		t.Errorf("unknown tool: %q", res.FirstText())
	}
}

func TestPanicBecomesErrorResult(t *testing.T) {
	boom := fakeTool{spec: orchestrator.Spec{Name: "boom", ParallelSafe: true},
		call: func(context.Context, json.RawMessage) (*orchestrator.Result, error) { panic("kaput") }}
	reg, run := newRegistry(t, provider{orchestrator.FeatureStructural, []orchestrator.Tool{boom}})
	res, err := reg.Call(context.Background(), run, orchestrator.SurfaceFull, "boom", nil)
	if err != nil || !res.IsError || !strings.Contains(res.FirstText(), "kaput") {
		t.Fatalf("panic: %+v %v", res, err)
	}
}

func TestNonParallelSafeToolsAreSerialised(t *testing.T) {
	var running, maxRunning atomic.Int32
	slow := fakeTool{spec: orchestrator.Spec{Name: "slow", ParallelSafe: false},
		call: func(context.Context, json.RawMessage) (*orchestrator.Result, error) {
			n := running.Add(1)
			for {
				m := maxRunning.Load()
				if n <= m || maxRunning.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(20 * time.Millisecond)
			running.Add(-1)
			return orchestrator.Text("ok"), nil
		}}
	reg, run := newRegistry(t, provider{orchestrator.FeatureKernels, []orchestrator.Tool{slow}})
	done := make(chan struct{})
	for range 4 {
		go func() {
			reg.Call(context.Background(), run, orchestrator.SurfaceFull, "slow", nil)
			done <- struct{}{}
		}()
	}
	for range 4 {
		<-done
	}
	if maxRunning.Load() != 1 {
		t.Fatalf("%d calls overlapped", maxRunning.Load())
	}
}

func TestRunEndCancelsCallsAndRunsClosers(t *testing.T) {
	started := make(chan struct{})
	wait := fakeTool{spec: orchestrator.Spec{Name: "wait", ParallelSafe: true},
		call: func(ctx context.Context, _ json.RawMessage) (*orchestrator.Result, error) {
			close(started)
			<-ctx.Done()
			return orchestrator.Text("cancelled"), nil
		}}
	reg, run := newRegistry(t, provider{orchestrator.FeatureKernels, []orchestrator.Tool{wait}})
	var order []string
	run.OnEnd(func() { order = append(order, "first") })
	run.OnEnd(func() { order = append(order, "second") })
	got := make(chan string)
	go func() {
		res, _ := reg.Call(context.Background(), run, orchestrator.SurfaceFull, "wait", nil)
		got <- res.FirstText()
	}()
	<-started
	run.End("test")
	if s := <-got; s != "cancelled" {
		t.Fatalf("call after end: %q", s)
	}
	if strings.Join(order, ",") != "second,first" {
		t.Fatalf("closers ran %v, want newest first", order)
	}
	if _, err := reg.Call(context.Background(), run, orchestrator.SurfaceFull, "wait", nil); err == nil {
		t.Fatal("call on an ended run succeeded")
	}
}

func TestCallTimeout(t *testing.T) {
	slow := fakeTool{spec: orchestrator.Spec{Name: "slow", ParallelSafe: true, Timeout: 30 * time.Millisecond},
		call: func(ctx context.Context, _ json.RawMessage) (*orchestrator.Result, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}}
	reg, run := newRegistry(t, provider{orchestrator.FeatureKernels, []orchestrator.Tool{slow}})
	res, err := reg.Call(context.Background(), run, orchestrator.SurfaceFull, "slow", nil)
	if err != nil || !res.IsError || !strings.Contains(res.FirstText(), "timed out") {
		t.Fatalf("timeout: %+v %v", res, err)
	}
}

// stuckTool blocks until release is closed, whatever its context says: a
// read of a FIFO, a library call that ignores cancellation. started is
// closed when it is called and returned when it has returned.
type stuckTool struct {
	spec                       orchestrator.Spec
	started, release, returned chan struct{}
}

func newStuckTool(spec orchestrator.Spec) *stuckTool {
	return &stuckTool{spec: spec, started: make(chan struct{}), release: make(chan struct{}), returned: make(chan struct{})}
}

func (s *stuckTool) Spec() orchestrator.Spec { return s.spec }
func (s *stuckTool) Call(context.Context, *orchestrator.Run, json.RawMessage) (*orchestrator.Result, error) {
	defer close(s.returned)
	close(s.started)
	<-s.release
	return orchestrator.Text("too late"), nil
}

// waitStuck waits until the gauge reads want: the work that returns
// counts itself down after it has returned.
func waitStuck(t *testing.T, reg *orchestrator.Registry, want float64) {
	t.Helper()
	for testutil.ToFloat64(reg.Metrics().StuckCalls) != want {
		time.Sleep(time.Millisecond)
	}
}

// Issue 11 item 3.
func TestStuckToolIsAnsweredAtItsDeadline(t *testing.T) {
	stuck := newStuckTool(orchestrator.Spec{Name: "stuck", ParallelSafe: false, Timeout: 10 * time.Millisecond, CancelGrace: time.Millisecond})
	reg, run := newRegistry(t, provider{orchestrator.FeatureStructural, []orchestrator.Tool{stuck}})
	res, err := reg.Call(context.Background(), run, orchestrator.SurfaceFull, "stuck", nil)
	if err != nil || !res.IsError || !strings.Contains(res.FirstText(), "timed out after 10ms and did not stop") || !strings.Contains(res.FirstText(), "berth_stuck_calls") {
		t.Fatalf("got %+v %v, want a timeout answered without the tool", res, err)
	}
	if n := testutil.ToFloat64(reg.Metrics().StuckCalls); n != 1 {
		t.Fatalf("berth_stuck_calls is %v while the work is stuck, want 1", n)
	}
	if n := testutil.ToFloat64(reg.Metrics().ToolCalls.WithLabelValues("stuck", "read", "timeout")); n != 1 {
		t.Fatalf("timeouts counted %v, want 1", n)
	}
	// The serialised tool's next call waits for the stuck work, which
	// still holds the tool: it is refused at its own deadline.
	res, _ = reg.Call(context.Background(), run, orchestrator.SurfaceFull, "stuck", nil)
	if !res.IsError || !strings.Contains(res.FirstText(), "was not started") {
		t.Fatalf("second call: %q, want it refused while the first one's work runs", res.FirstText())
	}
	close(stuck.release)
	<-stuck.returned
	waitStuck(t, reg, 0)
}

// Issue 11 item 3.
func TestStuckToolIsAnsweredAtItsCancellation(t *testing.T) {
	stuck := newStuckTool(orchestrator.Spec{Name: "stuck", ParallelSafe: true, CancelGrace: time.Millisecond})
	reg, run := newRegistry(t, provider{orchestrator.FeatureStructural, []orchestrator.Tool{stuck}})
	ctx, cancel := context.WithCancel(context.Background())
	type answer struct {
		res *orchestrator.Result
		err error
	}
	got := make(chan answer)
	go func() {
		res, err := reg.Call(ctx, run, orchestrator.SurfaceFull, "stuck", nil)
		got <- answer{res, err}
	}()
	<-stuck.started
	cancel()
	a := <-got
	if a.err != nil || !a.res.IsError || !strings.Contains(a.res.FirstText(), "was cancelled and did not stop") {
		t.Fatalf("got %+v %v, want a cancellation answered without the tool", a.res, a.err)
	}
	if n := testutil.ToFloat64(reg.Metrics().StuckCalls); n != 1 {
		t.Fatalf("berth_stuck_calls is %v while the work is stuck, want 1", n)
	}
	close(stuck.release)
	<-stuck.returned
	waitStuck(t, reg, 0)
}

// Issue 11 item 3.
func TestStuckToolIsAnsweredWhenItsRunEnds(t *testing.T) {
	stuck := newStuckTool(orchestrator.Spec{Name: "stuck", ParallelSafe: true, CancelGrace: time.Millisecond})
	reg, run := newRegistry(t, provider{orchestrator.FeatureStructural, []orchestrator.Tool{stuck}})
	got := make(chan *orchestrator.Result)
	go func() {
		res, _ := reg.Call(context.Background(), run, orchestrator.SurfaceFull, "stuck", nil)
		got <- res
	}()
	<-stuck.started
	run.End("test")
	if res := <-got; !res.IsError || !strings.Contains(res.FirstText(), "did not stop when its run ended (test)") {
		t.Fatalf("got %q", res.FirstText())
	}
	close(stuck.release)
	<-stuck.returned
	waitStuck(t, reg, 0)
}

// A tool reads the surface of its call from its context (issue 11 item
// 14: vibe workers are told it).
func TestToolsSeeTheSurfaceOfTheirCall(t *testing.T) {
	which := fakeTool{spec: orchestrator.Spec{Name: "which", ParallelSafe: true},
		call: func(ctx context.Context, _ json.RawMessage) (*orchestrator.Result, error) {
			return orchestrator.Text(string(orchestrator.SurfaceOf(ctx))), nil
		}}
	reg, run := newRegistry(t, provider{orchestrator.FeatureStructural, []orchestrator.Tool{which}})
	for _, s := range []orchestrator.Surface{orchestrator.SurfaceFull, orchestrator.SurfacePlan, orchestrator.SurfaceReadonly} {
		if res, _ := reg.Call(context.Background(), run, s, "which", nil); res.FirstText() != string(s) {
			t.Errorf("a call on %s saw %q", s, res.FirstText())
		}
	}
	if s := orchestrator.SurfaceOf(context.Background()); s != orchestrator.SurfaceFull {
		t.Errorf("a context of no call says %q", s)
	}
}

// No arguments, however they are spelled (absent, blank, null), reach a
// tool as {}: once defaulted in one place, a blank string used to pass
// validation as {} yet reach the tool as itself.
//
// Issue 12 item 4.
func TestNoArgumentsReachTheToolAsEmptyObject(t *testing.T) {
	var got []string
	tool := fakeTool{spec: orchestrator.Spec{Name: "any", ParallelSafe: true},
		call: func(_ context.Context, args json.RawMessage) (*orchestrator.Result, error) {
			got = append(got, string(args))
			return orchestrator.Text("ok"), nil
		}}
	reg, run := newRegistry(t, provider{orchestrator.FeatureStructural, []orchestrator.Tool{tool}})
	for _, args := range []string{"", "  \n", "null", " null "} {
		res, err := reg.Call(context.Background(), run, orchestrator.SurfaceFull, "any", json.RawMessage(args))
		if err != nil || res.IsError {
			t.Fatalf("%q: %v %v", args, err, res)
		}
	}
	if strings.Join(got, ",") != "{},{},{},{}" {
		t.Errorf("the tool received %q, want {} each time", got)
	}
	if s := (orchestrator.Spec{}).Schema(); string(s) != `{"type":"object"}` {
		t.Errorf("a tool with no schema takes %s, want any object", s)
	}
}

// starter is a provider that records the runs it heard start and its
// shutdown.
type starter struct {
	provider
	started  []string
	shutdown atomic.Int32
}

func (s *starter) RunStarted(run *orchestrator.Run) { s.started = append(s.started, run.ID) }
func (s *starter) Shutdown()                        { s.shutdown.Add(1) }

// Runs.OnStart wired to the registry tells a provider a run started only
// when the provider's feature is on for it (lsp's prewarm, issue 28 item
// 1), and the registry's Shutdown reaches every provider that keeps
// something beyond its runs (parked servers, item 2).
func TestRunStartedAndShutdownReachTheProviders(t *testing.T) {
	lsp := &starter{provider: provider{feature: orchestrator.FeatureLSP}}
	reg, _ := newRegistry(t, lsp, provider{feature: orchestrator.FeatureStructural})
	rs := orchestrator.NewRuns(metrics.NewForTest(), time.Hour, hostOnly())
	rs.OnStart = reg.RunStarted
	t.Cleanup(rs.StopAll)
	for _, c := range []struct {
		id       string
		features map[string]bool
	}{{"on", nil}, {"off", map[string]bool{orchestrator.FeatureLSP: false}}} {
		if _, err := rs.Start(context.Background(), orchestrator.StartParams{RunID: c.id, Workdir: t.TempDir(), Features: c.features}); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(lsp.started, ",") != "on" {
		t.Errorf("the lsp provider heard %v start, want only the run with lsp on", lsp.started)
	}
	reg.Shutdown()
	if n := lsp.shutdown.Load(); n != 1 {
		t.Errorf("shutdowns: %d, want 1", n)
	}
}

// Every refusal and failure of a call is an error result whose
// ErrorClass says its class; only a run that has ended is a Go error
// (the protocol's -32002).
//
// Issue 27 item 3.
func TestCallResultsCarryTheirClass(t *testing.T) {
	failing := fakeTool{spec: orchestrator.Spec{Name: "failing", ParallelSafe: true},
		call: func(context.Context, json.RawMessage) (*orchestrator.Result, error) {
			return nil, fmt.Errorf("the socket is gone: start a new run: %w", errclass.ErrGone)
		}}
	plain := fakeTool{spec: orchestrator.Spec{Name: "plain", ParallelSafe: true},
		call: func(context.Context, json.RawMessage) (*orchestrator.Result, error) {
			return nil, errors.New("disk on fire")
		}}
	slow := fakeTool{spec: orchestrator.Spec{Name: "slow", ParallelSafe: true, Timeout: 30 * time.Millisecond},
		call: func(ctx context.Context, _ json.RawMessage) (*orchestrator.Result, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}}
	reg, run := newRegistry(t, provider{orchestrator.FeatureStructural, []orchestrator.Tool{
		echo("w", orchestrator.Write), failing, plain, slow,
	}})
	ctx := context.Background()
	for _, tc := range []struct {
		what, tool string
		surface    orchestrator.Surface
		args       string
		class      errclass.Class
		text       string
	}{
		{"a refused tier", "w", orchestrator.SurfacePlan, `{"text":"x"}`, errclass.Permission, "not allowed on the plan surface"},
		{"bad arguments", "w", orchestrator.SurfaceFull, `{"txt":"x"}`, errclass.Invalid, "invalid arguments for w"},
		{"an unknown tool", "nope", orchestrator.SurfaceFull, `{}`, errclass.NotFound, `unknown tool "nope"`},
		{"a tool's classed error", "failing", orchestrator.SurfaceFull, `{}`, errclass.Gone, "failing: the socket is gone: start a new run"},
		{"a tool's error of no class", "plain", orchestrator.SurfaceFull, `{}`, "", "plain: disk on fire"},
		{"a timeout", "slow", orchestrator.SurfaceFull, `{}`, errclass.Timeout, "slow timed out after 30ms"},
	} {
		res, err := reg.Call(ctx, run, tc.surface, tc.tool, json.RawMessage(tc.args))
		if err != nil || res == nil || !res.IsError || res.ErrorClass != tc.class || !strings.Contains(res.FirstText(), tc.text) || strings.HasSuffix(res.FirstText(), ": gone") {
			t.Errorf("%s: %+v %v; want an error result of class %q saying %q", tc.what, res, err, tc.class, tc.text)
		}
	}
	run.End("test")
	if _, err := reg.Call(ctx, run, orchestrator.SurfaceFull, "failing", nil); !errors.Is(err, orchestrator.ErrRunEnded) || errclass.Of(err) != errclass.Gone {
		t.Errorf("a call on an ended run: %v; want ErrRunEnded, of class gone", err)
	}
}
