//go:build berthtest

// Package testtools is a provider of tools that exist only for Berth's
// end-to-end tests: one per tier, and tools that panic, sleep, serialise,
// start a child process, print to stdout, ask the human and re-enter the
// harness, so the tests can check dispatch, tiers, cancellation and
// cleanup through the real binary. Only a binary built with -tags berthtest
// has it, and registers it only when BERTH_TEST_TOOLS=1.
//
// It must never be registered in production: test_write writes files and
// test_exec runs any command.
package testtools

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/orchestrator"
)

// Feature is the feature the test tools ride on: structural, on by
// default, so a run sees them unless it turns structural off.
const Feature = orchestrator.FeatureStructural

type provider struct{}

// New returns the test tools' provider.
func New() orchestrator.Provider { return provider{} }

func (provider) Feature() string { return Feature }

func (provider) Tools(*orchestrator.Run) []orchestrator.Tool { return tools }

// tools are built once: the registry asks for them on every call.
var tools = []orchestrator.Tool{
	tool{spec("test_echo", orchestrator.Read, true, "Echo text back, repeat times (default 1). Pass {text, repeat?}.", `{"text":{"type":"string"},"repeat":{"type":"integer","minimum":1,"maximum":100000}}`, "text"), echo},
	tool{spec("test_write", orchestrator.Write, true, "Write content to a file inside the working directory. Pass {path, content}.", `{"path":{"type":"string"},"content":{"type":"string"}}`, "path", "content"), write},
	tool{spec("test_exec", orchestrator.Exec, true, "Run argv in the run's enclosure and return its stdout. Pass {argv}.", `{"argv":{"type":"array","items":{"type":"string"},"minItems":1}}`, "argv"), execute},
	tool{spec("test_panic", orchestrator.Read, true, "Panic.", `{}`), panicky},
	tool{spec("test_slow", orchestrator.Read, true, "Sleep {seconds} or until cancelled; says which.", `{"seconds":{"type":"number"}}`, "seconds"), slow},
	tool{spec("test_serial", orchestrator.Read, false, "Not parallel-safe: hold for {ms} and report how many test_serial calls of this run overlapped.", `{"ms":{"type":"integer"}}`, "ms"), serial},
	tool{spec("test_child", orchestrator.Exec, true, "Start a long-lived child (sleep 600) owned by the run and return its pid.", `{}`), child},
	tool{spec("test_ask", orchestrator.Read, true, "Ask the human {question} through the harness and return the answer as JSON.", `{"question":{"type":"string"},"timeout_seconds":{"type":"number"}}`, "question"), ask},
	tool{spec("test_stray", orchestrator.Read, true, "Print a line to the process's stdout (which must not reach the protocol).", `{}`), stray},
	tool{spec("test_reenter", orchestrator.Read, true, "Call the harness's tool {name} with {arguments} and return its result.", `{"name":{"type":"string"},"arguments":{"type":"object"}}`, "name"), reenter},
}

func spec(name string, tier orchestrator.Tier, parallel bool, desc, props string, required ...string) orchestrator.Spec {
	req, _ := json.Marshal(required)
	if required == nil {
		req = []byte("[]")
	}
	return orchestrator.Spec{
		Name: name, Tier: tier, Description: desc, ParallelSafe: parallel,
		InputSchema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":%s,"required":%s,"additionalProperties":false}`, props, req)),
	}
}

type tool struct {
	s    orchestrator.Spec
	call func(ctx context.Context, run *orchestrator.Run, args json.RawMessage) (*orchestrator.Result, error)
}

func (t tool) Spec() orchestrator.Spec { return t.s }
func (t tool) Call(ctx context.Context, run *orchestrator.Run, args json.RawMessage) (*orchestrator.Result, error) {
	return t.call(ctx, run, args)
}

func echo(_ context.Context, _ *orchestrator.Run, args json.RawMessage) (*orchestrator.Result, error) {
	var a struct {
		Text   string
		Repeat int
	}
	_ = json.Unmarshal(args, &a)
	return orchestrator.Text(strings.Repeat(a.Text, max(a.Repeat, 1))), nil
}

func write(_ context.Context, run *orchestrator.Run, args json.RawMessage) (*orchestrator.Result, error) {
	var a struct{ Path, Content string }
	_ = json.Unmarshal(args, &a)
	root, err := run.Root()
	if err != nil {
		return nil, err
	}
	p, err := root.Resolve(a.Path)
	if err != nil {
		return orchestrator.Errorf("%v", err), nil
	}
	if err := os.WriteFile(p, []byte(a.Content), 0o644); err != nil {
		return orchestrator.Errorf("writing %s: %v", a.Path, err), nil
	}
	return orchestrator.Textf("wrote %d bytes to %s", len(a.Content), a.Path), nil
}

func execute(ctx context.Context, run *orchestrator.Run, args json.RawMessage) (*orchestrator.Result, error) {
	var a struct{ Argv []string }
	_ = json.Unmarshal(args, &a)
	dir, err := run.Enclosure.MapPath(run.Workdir)
	if err != nil {
		return orchestrator.Errorf("%v", err), nil
	}
	p, err := run.Enclosure.Start(ctx, enclosure.Cmd{Path: a.Argv[0], Args: a.Argv[1:], Dir: dir, Stderr: io.Discard})
	if err != nil {
		return orchestrator.Errorf("%v", err), nil
	}
	_ = p.Stdin().Close()
	stop := context.AfterFunc(ctx, func() { _ = p.Kill() })
	defer stop()
	out, _ := io.ReadAll(io.LimitReader(p.Stdout(), 1<<20))
	code, err := p.Wait()
	if err != nil || code != 0 {
		return orchestrator.Errorf("%s exited with %d (%v): %s", a.Argv[0], code, err, out), nil
	}
	return orchestrator.Text(string(out)), nil
}

func panicky(context.Context, *orchestrator.Run, json.RawMessage) (*orchestrator.Result, error) {
	panic("test_panic was called")
}

func slow(ctx context.Context, _ *orchestrator.Run, args json.RawMessage) (*orchestrator.Result, error) {
	var a struct{ Seconds float64 }
	_ = json.Unmarshal(args, &a)
	select {
	case <-time.After(time.Duration(a.Seconds * float64(time.Second))):
		return orchestrator.Text("slept"), nil
	case <-ctx.Done():
		return orchestrator.Errorf("cancelled: %v", ctx.Err()), nil
	}
}

type serialKey struct{}

type serialState struct {
	mu        sync.Mutex
	now, most int
}

func serial(_ context.Context, run *orchestrator.Run, args json.RawMessage) (*orchestrator.Result, error) {
	var a struct{ Ms int }
	_ = json.Unmarshal(args, &a)
	st := run.Value(serialKey{}, func() any { return &serialState{} }).(*serialState)
	st.mu.Lock()
	st.now++
	st.most = max(st.most, st.now)
	st.mu.Unlock()
	time.Sleep(time.Duration(a.Ms) * time.Millisecond)
	st.mu.Lock()
	st.now--
	most := st.most
	st.mu.Unlock()
	return orchestrator.Textf("max overlap %d", most), nil
}

func child(ctx context.Context, run *orchestrator.Run, _ json.RawMessage) (*orchestrator.Result, error) {
	dir, err := run.Enclosure.MapPath(run.Workdir)
	if err != nil {
		return orchestrator.Errorf("%v", err), nil
	}
	p, err := run.Enclosure.Start(ctx, enclosure.Cmd{Path: "sleep", Args: []string{"600"}, Dir: dir, Stderr: io.Discard})
	if err != nil {
		return orchestrator.Errorf("%v", err), nil
	}
	run.OnEnd(func() {
		_ = p.Kill()
		_, _ = p.Wait()
	})
	return orchestrator.Textf("%d", p.Pid()), nil
}

func stray(context.Context, *orchestrator.Run, json.RawMessage) (*orchestrator.Result, error) {
	fmt.Fprintln(os.Stdout, "a stray line on stdout")
	return orchestrator.Text("printed"), nil
}

func ask(ctx context.Context, run *orchestrator.Run, args json.RawMessage) (*orchestrator.Result, error) {
	var a struct {
		Question       string
		TimeoutSeconds float64 `json:"timeout_seconds"`
	}
	_ = json.Unmarshal(args, &a)
	q := orchestrator.Question{Number: 1, Question: a.Question, AllowFreeText: true, Timeout: time.Duration(a.TimeoutSeconds * float64(time.Second))}
	if q.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, q.Timeout)
		defer cancel()
	}
	ans, err := run.Harness.Ask(ctx, q)
	if err != nil {
		return orchestrator.Errorf("ask failed: %v", err), nil
	}
	b, _ := json.Marshal(ans)
	return orchestrator.Text(string(b)), nil
}

func reenter(ctx context.Context, run *orchestrator.Run, args json.RawMessage) (*orchestrator.Result, error) {
	var a struct {
		Name      string
		Arguments json.RawMessage
	}
	_ = json.Unmarshal(args, &a)
	raw, err := run.Harness.CallTool(ctx, orchestrator.ToolCall{Name: a.Name, Arguments: a.Arguments, Origin: orchestrator.Origin{Tool: "test_reenter"}})
	if err != nil {
		return orchestrator.Errorf("harness refused: %v", err), nil
	}
	var res orchestrator.Result
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, err
	}
	return &orchestrator.Result{Content: append([]orchestrator.Block{orchestrator.TextBlock("harness says:")}, res.Content...), IsError: res.IsError}, nil
}
