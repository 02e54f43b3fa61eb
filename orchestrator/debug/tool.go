package debug

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/berth-dev/berth/internal/errclass"
	"github.com/berth-dev/berth/orchestrator"
)

const description = `Drive a debugger (debugpy for .py, delve for a Go package or .go file, lldb-dap for a native executable, dart for .dart) over the Debug Adapter Protocol. One session per conversation; it ends by itself %s after launch (its time to live).

Pass "operation" and that operation's arguments:
- adapters: which adapters are usable here and, if not, what is missing (root marker, executable).
- status: whether a session runs, its adapter, program and age, and where it stopped.
- breakpoints {file, lines[]}: replace the breakpoints of a file (an empty list clears it); allowed before launch. Says, per line, verified or unverified with the adapter's reason; a line past the end of the file is refused.
- launch {program, args[]}: start the program (a path inside the working directory) stopped at your breakpoints in files of its adapter's languages (the others are held back, and named); answers where it stopped, or that it ended or is still running.
- attach {port}: connect to a debugpy already listening on that port (python -m debugpy --listen PORT).
- continue, pause, step_over, step_in, step_out {thread_id?}: run or step, then say where it stopped (file:line and the source line), or "still running: call pause or status".
- threads: thread ids and names.
- stack {thread_id?}: up to 30 frames with their frame_id.
- scopes {frame_id}: the frame's scopes, each with a reference.
- variables {reference}: up to 50 children; values cut at 400 characters; a child with its own reference can be expanded. Frame ids and references hold only until the program moves: after a step or continue, take fresh ones from stack and scopes.
- evaluate {expression, frame_id?}: evaluate in that frame (default: where it stopped).
- output: what the program printed (stdout and stderr), capped.
- terminate: end the session, the program and the adapter.`

// operations are the operations in the order the description gives
// them, each with the arguments it takes; required ones are marked with a
// trailing "!".
var operations = []struct {
	name   string
	fields []string
}{
	{"adapters", nil},
	{"status", nil},
	{"breakpoints", []string{"file!", "lines!"}},
	{"launch", []string{"program!", "args"}},
	{"attach", []string{"port!"}},
	{"continue", []string{"thread_id"}},
	{"pause", []string{"thread_id"}},
	{"step_over", []string{"thread_id"}},
	{"step_in", []string{"thread_id"}},
	{"step_out", []string{"thread_id"}},
	{"threads", nil},
	{"stack", []string{"thread_id"}},
	{"scopes", []string{"frame_id!"}},
	{"variables", []string{"reference!"}},
	{"evaluate", []string{"expression!", "frame_id"}},
	{"output", nil},
	{"terminate", nil},
}

// properties are every operation's arguments, described for the model.
const properties = `{
  "file": {"type": "string", "description": "breakpoints: the source file, relative to the working directory (or absolute as the container sees it)"},
  "lines": {"type": "array", "items": {"type": "integer", "minimum": 1}, "description": "breakpoints: 1-based lines; empty clears the file"},
  "program": {"type": "string", "description": "launch: a .py or .go file, a Go package directory, a native executable or a .dart file"},
  "args": {"type": "array", "items": {"type": "string"}, "description": "launch: the program's arguments"},
  "port": {"type": "integer", "minimum": 1, "maximum": 65535, "description": "attach: the port debugpy listens on"},
  "thread_id": {"type": "integer", "minimum": 1, "description": "continue, pause, step_*, stack: a thread id from threads (default: the thread that stopped)"},
  "frame_id": {"type": "integer", "minimum": 0, "description": "scopes, evaluate: a frame_id from stack or from where the program stopped"},
  "reference": {"type": "integer", "minimum": 1, "description": "variables: a reference from scopes, variables or evaluate"},
  "expression": {"type": "string", "minLength": 1, "description": "evaluate: an expression in the program's language"}
}`

// inputSchema is built once from operations: what each operation takes
// and needs is an if/then/else link of the schema, so the model reads it
// in tools/list and the registry refuses a call that breaks it before the
// tool runs.
var inputSchema = buildSchema()

func buildSchema() json.RawMessage {
	props := map[string]any{}
	if err := json.Unmarshal([]byte(properties), &props); err != nil {
		panic(fmt.Sprintf("debug: properties: %v", err))
	}
	var names []string
	var links []orchestrator.When
	byFields := map[string]int{} // operations that take the same arguments share a link
	for _, op := range operations {
		names = append(names, op.name)
		key := strings.Join(op.fields, ",")
		if i, ok := byFields[key]; ok {
			links[i].Values = append(links[i].Values, op.name)
			continue
		}
		takes := map[string]any{"operation": map[string]any{}}
		var required []string
		for _, f := range op.fields {
			name, req := strings.CutSuffix(f, "!")
			takes[name] = map[string]any{}
			if req {
				required = append(required, name)
			}
		}
		then := map[string]any{"properties": takes, "additionalProperties": false}
		if required != nil {
			then["required"] = required
		}
		byFields[key] = len(links)
		links = append(links, orchestrator.When{Values: []string{op.name}, Then: then})
	}
	props["operation"] = map[string]any{"type": "string", "enum": names, "description": "what to do"}
	return orchestrator.Chain(map[string]any{
		"type":                 "object",
		"properties":           props,
		"required":             []string{"operation"},
		"additionalProperties": false,
	}, "operation", links...)
}

// args are the tool's arguments.
type args struct {
	Operation  string   `json:"operation"`
	File       string   `json:"file"`
	Lines      []int    `json:"lines"`
	Program    string   `json:"program"`
	Args       []string `json:"args"`
	Port       int      `json:"port"`
	ThreadID   int      `json:"thread_id"`
	FrameID    int      `json:"frame_id"`
	Reference  int      `json:"reference"`
	Expression string   `json:"expression"`
}

type tool struct{ p *Provider }

func (t tool) Spec() orchestrator.Spec {
	return orchestrator.Spec{
		Name: "debug", Tier: orchestrator.Exec, Description: fmt.Sprintf(description, t.p.cfg.SessionTTL),
		InputSchema: inputSchema, ParallelSafe: false,
	}
}

func (t tool) Call(ctx context.Context, run *orchestrator.Run, raw json.RawMessage) (*orchestrator.Result, error) {
	var a args
	if err := json.Unmarshal(raw, &a); err != nil {
		return orchestrator.Errorf("invalid arguments for debug: %v", err), nil
	}
	if a.Operation == "adapters" {
		// Detection only: it touches no conversation state.
		return orchestrator.Text(t.p.adapters(ctx, run)), nil
	}
	c, err := t.p.join(run)
	if err != nil {
		return orchestrator.Errorf("debug %s: %v", a.Operation, err), nil
	}
	select {
	case c.lock <- struct{}{}:
		defer func() { <-c.lock }()
	case <-ctx.Done():
		return orchestrator.Errorf("debug %s was not run: another debug operation in this conversation is still running and this call was cancelled while waiting", a.Operation), nil
	}
	text, err := t.p.operate(ctx, run, c, a)
	if s, _ := t.p.current(c); s != nil {
		// What the answer says survives a Berth killed right after it.
		s.keepNow(c.storedBreakpoints())
	}
	if err != nil {
		return orchestrator.Errorf("debug %s: %s", a.Operation, t.p.explain(c, err)).Classed(err), nil
	}
	return orchestrator.Text(text), nil
}

// explain turns an operation's error into a sentence for the model.
func (p *Provider) explain(c *conversation, err error) string {
	var ae *adapterError
	switch {
	case errors.As(err, &ae):
		return fmt.Sprintf("the adapter refused %s: %s", ae.command, ae.message)
	case errors.Is(err, ErrEnded):
		if _, last := p.current(c); last != nil {
			return last.endText()
		}
	case errors.Is(err, ErrTimeout):
		return errclass.Say(err) + ": the adapter may be busy or stuck; call status, or terminate and launch again"
	}
	return errclass.Say(err)
}
