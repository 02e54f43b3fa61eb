package rpc

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
	"github.com/berth-dev/berth/orchestrator/state"
)

// countTool counts its runs; with a gate, each run waits for it.
type countTool struct {
	name string
	tier orchestrator.Tier
	n    *atomic.Int32
	gate chan struct{}
}

func (t countTool) Spec() orchestrator.Spec {
	return orchestrator.Spec{Name: t.name, Tier: t.tier, InputSchema: json.RawMessage(`{"type":"object"}`)}
}

func (t countTool) Call(ctx context.Context, _ *orchestrator.Run, args json.RawMessage) (*orchestrator.Result, error) {
	n := t.n.Add(1)
	if t.gate != nil {
		select {
		case <-t.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return orchestrator.Text(t.name + " ran " + string(rune('0'+n)) + " " + string(args)), nil
}

type countProvider struct{ tools []orchestrator.Tool }

func (countProvider) Feature() string                               { return orchestrator.FeatureStructural }
func (p countProvider) Tools(*orchestrator.Run) []orchestrator.Tool { return p.tools }

// countServer serves a write tool "put" and a read tool "look", each
// counting its runs, with the call ids kept in store (nil: in memory).
func countServer(t *testing.T, store CallStore, earlier []state.Call, gate chan struct{}) (*Server, *atomic.Int32, *atomic.Int32) {
	t.Helper()
	var puts, looks atomic.Int32
	m := metrics.NewForTest()
	reg := orchestrator.NewRegistry(m, 0)
	reg.Add(countProvider{tools: []orchestrator.Tool{
		countTool{name: "put", tier: orchestrator.Write, n: &puts, gate: gate},
		countTool{name: "look", tier: orchestrator.Read, n: &looks},
	}})
	s := &Server{Registry: reg, Runs: orchestrator.NewRuns(m, 0, hostOnly()), Metrics: m, Version: "test", CallStore: store, EarlierCalls: earlier}
	t.Cleanup(func() {
		s.Close()
		s.Runs.StopAll()
	})
	return s, &puts, &looks
}

func classOf(err error) string {
	if e, ok := err.(*Error); ok {
		return string(e.ClassOf())
	}
	return ""
}

// Without a state directory, a call id is remembered in memory: a retry
// of an answered call gets its answer again without running it, a retry
// while it runs and an id given to another call are refused (conflict),
// and a bad id is refused naming the field.
//
// Issue 29 item 3.
func TestCallIDsAreDeduplicatedInMemory(t *testing.T) {
	gate := make(chan struct{})
	s, puts, _ := countServer(t, nil, nil, gate)
	c := connect(t, s)
	ctx := context.Background()
	run := startRun(t, c)
	first := make(chan error, 1)
	go func() {
		_, err := c.CallToolWithID(ctx, "call-1", run.RunID, "", "put", map[string]int{"a": 1})
		first <- err
	}()
	for puts.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := c.CallToolWithID(ctx, "call-1", run.RunID, "", "put", map[string]int{"a": 1}); classOf(err) != "conflict" || !strings.Contains(err.Error(), "is running") {
		t.Fatalf("a retry while the call runs: %v, want conflict saying it is running", err)
	}
	close(gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	res, err := c.CallToolWithID(ctx, "call-1", run.RunID, "", "put", json.RawMessage(`{ "a" : 1 }`))
	if err != nil || puts.Load() != 1 || !strings.Contains(res.Content[0].Text, "put ran 1") {
		t.Fatalf("a retry of an answered call: %+v, %v, %d runs; want its answer again, one run", res, err, puts.Load())
	}
	if _, err := c.CallToolWithID(ctx, "call-1", run.RunID, "", "put", map[string]int{"a": 2}); classOf(err) != "conflict" || !strings.Contains(err.Error(), "another call") {
		t.Fatalf("an id given to another call: %v, want conflict", err)
	}
	for _, bad := range []string{"", "tab\there", strings.Repeat("x", 257)} {
		err := c.Call(ctx, "tools/call", map[string]any{"runId": run.RunID, "name": "put", "callId": bad}, nil)
		if e, ok := err.(*Error); !ok || e.Code != CodeInvalidParams || !strings.Contains(e.Message, `"callId"`) {
			t.Errorf("callId %q: %v, want -32602 naming callId", bad, err)
		}
	}
	if puts.Load() != 1 {
		t.Fatalf("put ran %d times, want 1", puts.Load())
	}
}

// With a state directory, a call id is recorded before its call is
// dispatched and its outcome when it ends. A Berth started again on the
// directory answers an answered call's id with the answer kept; a call
// that was in flight when the Berth before died gets "Berth restarted:
// the call's result is unknown" (outcome_unknown) unless its tool is of
// the read tier, which runs again.
//
// Issue 29 item 3.
func TestCallIDsOutliveARestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	st, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, puts, _ := countServer(t, st, nil, nil)
	c := connect(t, s)
	ctx := context.Background()
	workdir := t.TempDir()
	if _, err := c.StartRun(ctx, StartRunParams{RunID: "run-1", Workdir: workdir}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CallToolWithID(ctx, "done", "run-1", "", "put", map[string]int{"a": 1}); err != nil {
		t.Fatal(err)
	}
	calls, _ := st.Calls()
	if len(calls) != 1 || calls[0].Outcome != state.CallOK || calls[0].Tool != "put" {
		t.Fatalf("the state's calls: %+v", calls)
	}
	// Two calls in flight when Berth died: recorded, with no outcome.
	for _, inFlight := range []state.Call{
		{Run: "run-1", ID: "lost-put", Tool: "put", Digest: callDigest("put", json.RawMessage(`{}`)), Started: time.Now()},
		{Run: "run-1", ID: "lost-look", Tool: "look", Digest: callDigest("look", json.RawMessage(`{}`)), Started: time.Now()},
	} {
		if err := st.PutCall(inFlight); err != nil {
			t.Fatal(err)
		}
	}
	earlier, _ := st.Calls()
	s2, puts2, looks2 := countServer(t, st, earlier, nil)
	c2 := connect(t, s2)
	if _, err := c2.StartRun(ctx, StartRunParams{RunID: "run-1", Workdir: workdir}); err != nil {
		t.Fatal(err)
	}
	res, err := c2.CallToolWithID(ctx, "done", "run-1", "", "put", map[string]int{"a": 1})
	if err != nil || !strings.Contains(res.Content[0].Text, "put ran 1") || puts2.Load() != 0 {
		t.Fatalf("an answered call's id after a restart: %+v, %v; want the answer kept, not a run", res, err)
	}
	_, err = c2.CallToolWithID(ctx, "lost-put", "run-1", "", "put", map[string]any{})
	if classOf(err) != "outcome_unknown" || !strings.Contains(err.Error(), "Berth restarted: the call's result is unknown") || puts2.Load() != 0 {
		t.Fatalf("a write in flight at the restart: %v; want outcome_unknown, not a run", err)
	}
	if e := err.(*Error); e.Code != CodeOutcomeUnknown {
		t.Fatalf("code %d, want %d", e.Code, CodeOutcomeUnknown)
	}
	if _, err := c2.CallToolWithID(ctx, "lost-look", "run-1", "", "look", map[string]any{}); err != nil || looks2.Load() != 1 {
		t.Fatalf("a read in flight at the restart: %v, %d runs; want it run again", err, looks2.Load())
	}
	calls, _ = st.Calls()
	for _, c := range calls {
		if c.ID == "lost-look" && c.Outcome != state.CallOK {
			t.Fatalf("the read run again is recorded %+v", c)
		}
	}
	_ = puts
}

// Call ids expire: past their bound (MaxCallIDs; 50 here) the oldest is forgotten, and from the
// state directory too; past CallIDTTL every one is.
//
// Issue 29 item 3.
func TestCallIDsExpire(t *testing.T) {
	st, err := state.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	cs := newCalls(st, nil, nil)
	cs.now = func() time.Time { return now }
	cs.max = 50
	for i := range cs.max + 5 {
		_, _, end := cs.begin("run", "id-"+itoa(i), "look", orchestrator.Read, nil)
		end(map[string]int{"i": i}, nil, false)
	}
	if calls, _ := st.Calls(); len(cs.byKey) != cs.max || len(calls) != cs.max {
		t.Fatalf("%d ids remembered, %d in the state; want %d", len(cs.byKey), len(calls), cs.max)
	}
	if _, ok := cs.byKey[callKey{"run", "id-0"}]; ok {
		t.Fatal("the oldest id is still remembered")
	}
	now = now.Add(CallIDTTL + time.Second)
	cs.begin("run", "late", "look", orchestrator.Read, nil)
	if calls, _ := st.Calls(); len(cs.byKey) != 1 || len(calls) != 1 {
		t.Fatalf("after the TTL: %d remembered, %d in the state; want the new one alone", len(cs.byKey), len(calls))
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
