package lsp

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

// specOnly is a tool with lsp's spec whose work is nothing, so that a
// call measures what dispatch adds: finding the tool and checking its
// arguments against lsp's schema.
type specOnly struct{}

func (specOnly) Spec() orchestrator.Spec { return lspSpec }
func (specOnly) Call(context.Context, *orchestrator.Run, json.RawMessage) (*orchestrator.Result, error) {
	return orchestrator.Text(""), nil
}

type specOnlyProvider struct{}

func (specOnlyProvider) Feature() string { return orchestrator.FeatureLSP }
func (specOnlyProvider) Tools(*orchestrator.Run) []orchestrator.Tool {
	return []orchestrator.Tool{specOnly{}}
}

// BenchmarkDispatchLSPArgs is the cost of dispatching a typical lsp call
// (references at a line and symbol), argument check included.
func BenchmarkDispatchLSPArgs(b *testing.B) {
	reg := orchestrator.NewRegistry(metrics.NewForTest(), time.Minute)
	reg.Add(specOnlyProvider{})
	run := orchestrator.NewRun("bench", "conv", b.TempDir(), host.New(), nil, nil)
	defer run.End("bench over")
	args := json.RawMessage(`{"action":"references","file":"internal/server/handler.go","line":42,"symbol":"h.store.Lookup"}`)
	ctx := context.Background()
	for b.Loop() {
		res, err := reg.Call(ctx, run, orchestrator.SurfaceFull, "lsp", args)
		if err != nil || res.IsError {
			b.Fatal(res, err)
		}
	}
}

// Issue 12 item 2: what each action needs is in lsp's schema, and the
// registry refuses a call without it, naming the action, the fields and
// what to pass, before the tool runs.
func TestActionRequirementsAreCheckedByTheSchema(t *testing.T) {
	reg := orchestrator.NewRegistry(metrics.NewForTest(), time.Minute)
	reg.Add(specOnlyProvider{})
	run := orchestrator.NewRun("r", "c", t.TempDir(), host.New(), nil, nil)
	defer run.End("test over")
	const where = `pass "file", the 1-based "line" and "symbol", a substring of that line that names the symbol (a column is never guessed)`
	for _, tc := range []struct{ args, want string }{
		{`{"action":"definition","file":"main.go","line":3}`, `definition needs "symbol": ` + where},
		{`{"action":"references"}`, `references needs "file", "line" and "symbol": ` + where},
		{`{"action":"hover","file":"","line":3,"symbol":"x"}`, `"file" must not be empty`},
		{`{"action":"code_actions","file":"main.go","line":0,"symbol":"x"}`, `"line" must be at least 1 (got 0)`},
		{`{"action":"diagnostics"}`, `diagnostics needs "file": a path, or "*" to run the project checker`},
		{`{"action":"symbols"}`, `symbols needs "query": pass "query" to search the workspace, or "file" to list that file's symbols`},
		{`{"action":"symbols","query":"","file":""}`, `"query" must not be empty`},
		{`{"action":"definition","file":"main.go","line":3,"symbol":"x","column":4}`, `lsp does not take "column" (it takes only "action", "all", "file", "line", "query", "symbol")`},
	} {
		res, err := reg.Call(context.Background(), run, orchestrator.SurfaceFull, "lsp", json.RawMessage(tc.args))
		if err != nil {
			t.Fatalf("%s: %v", tc.args, err)
		}
		want := "invalid arguments for lsp: " + tc.want + ". Fix the arguments and call again."
		if !res.IsError || res.FirstText() != want {
			t.Errorf("%s:\n got %q\nwant %q", tc.args, res.FirstText(), want)
		}
	}
	for _, args := range []string{
		`{"action":"definition","file":"main.go","line":3,"symbol":"x"}`,
		`{"action":"diagnostics","file":"*"}`,
		`{"action":"symbols","query":"Greet"}`,
		`{"action":"symbols","file":"main.go"}`,
		`{"action":"symbols","query":"","file":"main.go"}`,
		`{"action":"symbols","query":"Greet","file":""}`,
		`{"action":"status"}`,
		`{"action":"status","file":""}`,
		`{"action":"reload"}`,
	} {
		res, err := reg.Call(context.Background(), run, orchestrator.SurfaceFull, "lsp", json.RawMessage(args))
		if err != nil || res.IsError {
			t.Errorf("%s: %+v %v, want it to reach the tool", args, res, err)
		}
	}
}
