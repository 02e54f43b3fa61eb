package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/errclass"
	"github.com/berth-dev/berth/orchestrator"
)

// baseImage is a bookworm with no language server, adapter or
// interpreter, and no relay (the driver streams it in).
const baseImage = "berth/base:bookworm"

// A container that lacks what a tool runs (gopls, pylsp and pyright,
// python for debugpy and the kernel, node, a worker's program) answers
// every family's call with an error result of class not_found that names
// the program and says what to do (install it in the image, or set the
// key that names it), never a hang, a protocol error or another class.
//
// Issue 27 item 3.
func TestContainersDockerMissingExecutableIsNotFoundInEveryFamily(t *testing.T) {
	s := inContainer(baseImage).fresh(t)
	writeTree(t, s.Dir, downProject)
	c := startFamilies(t, family{name: "missing", config: map[string]any{
		"kernels": map[string]any{"python": "/usr/bin/python3"},
		"debug":   map[string]any{"python": "/usr/bin/python3"},
		"vibe": map[string]any{"runners": map[string][]string{
			"fast": {"/opt/no-such-agent/bin/agent", "--brief"},
			"good": {"/opt/no-such-agent/bin/agent", "--brief"},
		}},
	}})
	run := s.start(t, c, map[string]bool{"vibe": true})
	for _, k := range []struct {
		what    string
		surface orchestrator.Surface
		tool    string
		args    any
		names   string // the program the answer names
	}{
		{"lsp in a Go file", orchestrator.SurfaceFull, "lsp", map[string]any{"action": "definition", "file": "main.go", "line": 8, "symbol": "greet"}, "gopls"},
		{"lsp in a Python file", orchestrator.SurfaceFull, "lsp", map[string]any{"action": "definition", "file": "app.py", "line": 6, "symbol": "main"}, "py"},
		{"lsp_rename in a Go file", orchestrator.SurfaceFull, "lsp_rename", map[string]any{"file": "main.go", "line": 5, "symbol": "greet", "new_name": "hello"}, "gopls"},
		{"debug launch of a Python program", orchestrator.SurfaceFull, "debug", map[string]any{"operation": "launch", "program": "app.py"}, "python"},
		{"debug launch of a Go program", orchestrator.SurfaceFull, "debug", map[string]any{"operation": "launch", "program": "main.go"}, "dlv"},
		{"eval in Python", orchestrator.SurfaceFull, "eval", map[string]any{"code": "1+1", "language": "python", "description": "a kernel where python is missing"}, "python"},
		{"eval in JavaScript", orchestrator.SurfaceFull, "eval", map[string]any{"code": "1+1", "language": "javascript", "description": "a kernel where node is missing"}, "node"},
		{"vibe_spawn", orchestrator.SurfacePlan, "vibe_spawn", map[string]any{"brief": "port the parser", "label": "parser"}, "/opt/no-such-agent/bin/agent"},
	} {
		t.Run(strings.ReplaceAll(k.what, " ", "_"), func(t *testing.T) {
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := c.CallTool(ctx, run, k.surface, k.tool, k.args)
			if err != nil {
				t.Fatalf("a protocol error instead of an error result: %v", err)
			}
			got := text(res)
			t.Logf("%s (%s, class %q):\n%s", k.what, time.Since(start).Round(time.Millisecond), res.ErrorClass, got)
			if !res.IsError || res.ErrorClass != errclass.NotFound {
				t.Errorf("isError %v, errorClass %q; want an error result of class %q", res.IsError, res.ErrorClass, errclass.NotFound)
			}
			if !strings.Contains(got, k.names) {
				t.Errorf("the answer does not name %q", k.names)
			}
		})
	}
}
