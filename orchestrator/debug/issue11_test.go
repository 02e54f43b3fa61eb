package debug

import (
	"strings"
	"testing"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/orchestrator"
)

// callAs sends one debug call from run and returns its result.
func (e *env) callAs(run *orchestrator.Run, args string) *orchestrator.Result {
	e.t.Helper()
	res, err := e.reg.Call(e.t.Context(), run, orchestrator.SurfaceFull, "debug", []byte(args))
	if err != nil {
		e.t.Fatalf("debug %s from %s: Go error %v", args, run.ID, err)
	}
	e.t.Logf(">> (%s) debug %s\n<< error=%v %s", run.ID, args, res.IsError, res.FirstText())
	return res
}

// Issue 11 item 4: a run of another connection that reuses the
// conversation id can neither read nor drive the session; a run of the
// launching connection (a subagent's) shares it.
func TestIssue11Item4SessionBelongsToConnection(t *testing.T) {
	e := newEnv(t, "python", quickStops)
	connA, connB := new(int), new(int)
	e.run.Owner = connA
	e.ok(`{"operation":"breakpoints","file":"serve.py","lines":[5]}`)
	e.ok(`{"operation":"launch","program":"serve.py"}`, "launched serve.py with debugpy", "stopped (breakpoint)")

	sub := orchestrator.NewRun("run-sub", "conv-1", e.dir, enclosure.Host(), nil, nil)
	sub.Owner = connA
	defer sub.End("test over")
	if res := e.callAs(sub, `{"operation":"evaluate","expression":"count"}`); res.IsError {
		t.Fatalf("a run of the launching connection could not evaluate: %s", res.FirstText())
	}

	other := orchestrator.NewRun("run-other", "conv-1", e.dir, enclosure.Host(), nil, nil)
	other.Owner = connB
	defer other.End("test over")
	for _, op := range []string{
		`{"operation":"status"}`,
		`{"operation":"evaluate","expression":"count"}`,
		`{"operation":"stack"}`,
		`{"operation":"output"}`,
		`{"operation":"breakpoints","file":"serve.py","lines":[]}`,
		`{"operation":"launch","program":"app.py"}`,
		`{"operation":"terminate"}`,
	} {
		res := e.callAs(other, op)
		if !res.IsError {
			t.Fatalf("debug %s from another connection succeeded: %s", op, res.FirstText())
		}
		has(t, res.FirstText(), "a debug session of this conversation belongs to another connection")
	}
	// Detection touches nothing of the conversation.
	if res := e.callAs(other, `{"operation":"adapters"}`); res.IsError {
		t.Fatalf("adapters from another connection: %s", res.FirstText())
	}
	e.ok(`{"operation":"status"}`, "debugpy debugging serve.py", "stopped (breakpoint)")

	// Once the launching connection's runs are gone, the conversation id
	// is free again, with nothing of theirs left in it.
	e.run.End("test over")
	sub.End("test over")
	noProcess(t, e.dir)
	res := e.callAs(other, `{"operation":"status"}`)
	if res.IsError {
		t.Fatalf("status after the owner left: %s", res.FirstText())
	}
	has(t, res.FirstText(), "no debug session is running in this conversation")
	if text := res.FirstText(); strings.Contains(text, "serve.py") || strings.Contains(text, "stored breakpoints") {
		t.Fatalf("the next connection sees the last one's session or breakpoints:\n%s", text)
	}
}
