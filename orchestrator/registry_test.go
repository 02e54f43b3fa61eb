package orchestrator_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/berth-dev/berth/enclosure"
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
	run := orchestrator.NewRun("r1", "c1", t.TempDir(), enclosure.Host(), nil, nil)
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
