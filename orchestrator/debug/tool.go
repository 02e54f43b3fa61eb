package debug

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/berth-dev/berth/orchestrator"
)

const description = `Drive a debugger (debugpy for .py, delve for a Go package or .go file, lldb-dap for a native executable, dart for .dart) over the Debug Adapter Protocol. One session per conversation; it ends by itself %s after launch (its time to live).

Pass "operation" and that operation's arguments:
- adapters: which adapters are usable here and, if not, what is missing (root marker, executable).
- status: whether a session runs, its adapter, program and age, and where it stopped.
- breakpoints {file, lines[]}: replace the breakpoints of a file (an empty list clears it); allowed before launch. Says, per line, verified or unverified with the adapter's reason; a line past the end of the file is refused.
- launch {program, args[]}: start the program (a path inside the working directory) stopped at your breakpoints; answers where it stopped, or that it ended or is still running.
- attach {port}: connect to a debugpy already listening on that port (python -m debugpy --listen PORT).
- continue, pause, step_over, step_in, step_out {thread_id?}: run or step, then say where it stopped (file:line and the source line), or "still running: call pause or status".
- threads: thread ids and names.
- stack {thread_id?}: up to 30 frames with their frame_id.
- scopes {frame_id}: the frame's scopes, each with a reference.
- variables {reference}: up to 50 children; values cut at 400 characters; a child with its own reference can be expanded. Frame ids and references hold only until the program moves: after a step or continue, take fresh ones from stack and scopes.
- evaluate {expression, frame_id?}: evaluate in that frame (default: where it stopped).
- output: what the program printed (stdout and stderr), capped.
- terminate: end the session, the program and the adapter.`

const inputSchema = `{
  "type": "object",
  "properties": {
    "operation": {"type": "string", "enum": ["adapters", "status", "breakpoints", "launch", "attach", "continue", "pause", "step_over", "step_in", "step_out", "threads", "stack", "scopes", "variables", "evaluate", "output", "terminate"], "description": "what to do"},
    "file": {"type": "string", "description": "breakpoints: the source file, relative to the working directory"},
    "lines": {"type": "array", "items": {"type": "integer", "minimum": 1}, "description": "breakpoints: 1-based lines; empty clears the file"},
    "program": {"type": "string", "description": "launch: a .py or .go file, a Go package directory, a native executable or a .dart file"},
    "args": {"type": "array", "items": {"type": "string"}, "description": "launch: the program's arguments"},
    "port": {"type": "integer", "minimum": 1, "maximum": 65535, "description": "attach: the port debugpy listens on"},
    "thread_id": {"type": "integer", "minimum": 1, "description": "continue, pause, step_*, stack: a thread id from threads (default: the thread that stopped)"},
    "frame_id": {"type": "integer", "minimum": 0, "description": "scopes, evaluate: a frame_id from stack or from where the program stopped"},
    "reference": {"type": "integer", "minimum": 1, "description": "variables: a reference from scopes, variables or evaluate"},
    "expression": {"type": "string", "minLength": 1}
  },
  "required": ["operation"],
  "additionalProperties": false
}`

// fields lists, per operation, the arguments it takes; required ones are
// marked with a trailing "!".
var fields = map[string][]string{
	"adapters":    {},
	"status":      {},
	"breakpoints": {"file!", "lines!"},
	"launch":      {"program!", "args"},
	"attach":      {"port!"},
	"continue":    {"thread_id"},
	"pause":       {"thread_id"},
	"step_over":   {"thread_id"},
	"step_in":     {"thread_id"},
	"step_out":    {"thread_id"},
	"threads":     {},
	"stack":       {"thread_id"},
	"scopes":      {"frame_id!"},
	"variables":   {"reference!"},
	"evaluate":    {"expression!", "frame_id"},
	"output":      {},
	"terminate":   {},
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
		InputSchema: json.RawMessage(inputSchema), ParallelSafe: false,
	}
}

// check refuses arguments the operation does not take and names the
// missing required ones.
func check(raw json.RawMessage, op string) error {
	var given map[string]json.RawMessage
	if err := json.Unmarshal(raw, &given); err != nil {
		return err
	}
	allowed := map[string]bool{"operation": true}
	var missing []string
	for _, f := range fields[op] {
		name := strings.TrimSuffix(f, "!")
		allowed[name] = true
		if strings.HasSuffix(f, "!") {
			if _, ok := given[name]; !ok {
				missing = append(missing, name)
			}
		}
	}
	var extra []string
	for k := range given {
		if !allowed[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	switch {
	case len(missing) > 0:
		return fmt.Errorf("%s needs %s", op, strings.Join(missing, " and "))
	case len(extra) > 0:
		takes := "no other arguments"
		if len(fields[op]) > 0 {
			var names []string
			for _, f := range fields[op] {
				names = append(names, strings.TrimSuffix(f, "!"))
			}
			takes = "only " + strings.Join(names, ", ")
		}
		return fmt.Errorf("%s does not take %s (it takes %s)", op, strings.Join(extra, ", "), takes)
	}
	return nil
}

func (t tool) Call(ctx context.Context, run *orchestrator.Run, raw json.RawMessage) (*orchestrator.Result, error) {
	var a args
	if err := json.Unmarshal(raw, &a); err != nil {
		return orchestrator.Errorf("invalid arguments for debug: %v", err), nil
	}
	if err := check(raw, a.Operation); err != nil {
		return orchestrator.Errorf("%v. Fix the arguments and call again.", err), nil
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
	if err != nil {
		return orchestrator.Errorf("debug %s: %s", a.Operation, t.p.explain(c, err)), nil
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
		return err.Error() + ": the adapter may be busy or stuck; call status, or terminate and launch again"
	}
	return err.Error()
}
