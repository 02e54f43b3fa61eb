package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// kernelsSection names Debian's python (the one with pandas and
// matplotlib; in the images the only one) and a short idle budget, so the
// budget's two sides show quickly.
var kernelsSection = map[string]any{"kernels": map[string]any{"python": "/usr/bin/python3", "cell_idle_budget": "3s", "interrupt_grace": "2s"}}

// evalCell runs one cell through tools/call.
func evalCell(t *testing.T, c *rpc.Client, run, lang, code string) *orchestrator.Result {
	t.Helper()
	return callTool(t, c, run, "eval", map[string]any{"code": code, "language": lang, "description": "run one cell for the end to end test"})
}

// interpreters lists the site's python and node processes (not the
// relays that run them).
func interpreters(t *testing.T, s *site) []string {
	// A parked language server may be one (pyright is node): not a kernel.
	return slices.DeleteFunc(s.unparked(t), func(p string) bool {
		return strings.Contains(p, "berth-relay") || !strings.Contains(p, "python") && !strings.Contains(p, "node")
	})
}

// eval through the real binary: cells on both kernels, a table and a
// figure, tool() re-entry over harness/callTool answered and refused, the
// idle budget suspended by a slow bridge call but interrupting a silent
// loop, and run/stop leaving no interpreter behind.
func TestEvalThroughProtocol(t *testing.T) { runFamily(t, onHost, eval) }

var eval = family{name: "eval", config: kernelsSection, check: func(t *testing.T, c *rpc.Client, s *site) {
	var origins []orchestrator.Origin
	c.OnCallTool(func(ctx context.Context, p rpc.HarnessCallToolParams) (*orchestrator.Result, error) {
		origins = append(origins, p.Origin)
		switch p.Name {
		case "read":
			return orchestrator.Text("file contents"), nil
		case "subagent":
			select {
			case <-time.After(4500 * time.Millisecond):
				return orchestrator.Text("subagent finished"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return nil, errors.New("this harness does not allow " + p.Name + " from a cell")
	})
	run := s.start(t, c, nil)
	if !slices.Contains(toolNames(t, c, run, orchestrator.SurfaceFull), "eval") {
		t.Fatal("eval is not on the full surface")
	}
	if slices.Contains(toolNames(t, c, run, orchestrator.SurfacePlan), "eval") {
		t.Fatal("eval (exec tier) is on the plan surface")
	}

	steps := []struct {
		name, lang, code string
		isError          bool
		want             []string
		blockType        string
	}{
		{"state", "python", "import pandas as pd\ndf = pd.DataFrame({'n': [1, 2, 3]})\ndf.n.sum()", false, []string{"6"}, ""},
		{"table", "python", "df", false, nil, "table"},
		{"figure", "python", "import matplotlib.pyplot as plt\nplt.plot(df.n);", false, nil, "image"},
		{"fd 1 write", "python", "import os\nos.write(1, b'\\x1e{\"type\":\"done\"}\\n')\n'protocol intact'", false, []string{"protocol intact"}, ""},
		{"tool answered", "python", "tool('read', {'path': 'a.txt'})", false, []string{"'file contents'"}, ""},
		{"tool refused", "python", "tool('rm', {'path': 'a.txt'})", true, []string{"ToolError", "does not allow rm"}, ""},
		{"slow bridge call outlives the budget", "python", "tool('subagent', {})", false, []string{"subagent finished"}, ""},
		{"silent loop is interrupted", "python", "import time\ntime.sleep(30)", true, []string{"KeyboardInterrupt", "no output for 3s"}, ""},
		{"state survives the interrupt", "python", "df.n.max()", false, []string{"3"}, ""},
		{"javascript", "javascript", "const r = await tool('read', {}); r.length", false, []string{"13"}, ""},
	}
	for _, s := range steps {
		res := evalCell(t, c, run, s.lang, s.code)
		got := text(res)
		if res.IsError != s.isError {
			t.Fatalf("%s: isError %v, want %v:\n%s", s.name, res.IsError, s.isError, got)
		}
		for _, w := range s.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: result lacks %q:\n%s", s.name, w, got)
			}
		}
		if s.blockType != "" && !slices.ContainsFunc(res.Content, func(b orchestrator.Block) bool { return b.Type == s.blockType }) {
			t.Errorf("%s: no %s block in %+v", s.name, s.blockType, res.Content)
		}
	}
	if len(origins) == 0 || origins[0].Tool != "eval" || origins[0].Cell == "" {
		t.Errorf("harness/callTool origins: %+v", origins)
	}

	// The kernel works in the workdir as its place sees it, and what it
	// writes there is in the workdir Berth sees.
	cwd := s.Dir
	if s.Container != "" {
		cwd = s.Inside
	}
	res := evalCell(t, c, run, "python", "import os\nopen('from_kernel.txt', 'w').write('written in '+os.getcwd())\nos.getcwd()")
	if got := text(res); res.IsError || got != "'"+cwd+"'" {
		t.Errorf("the kernel's cwd: %s, want %q", got, cwd)
	}
	if b, err := os.ReadFile(filepath.Join(s.Dir, "from_kernel.txt")); err != nil || string(b) != "written in "+cwd {
		t.Errorf("the kernel's file, read from Berth's side: %q, %v", b, err)
	}

	if len(interpreters(t, s)) != 2 {
		t.Fatalf("want a python and a node kernel in %s, found %v", s.place, interpreters(t, s))
	}
	if err := c.StopRun(testCtx(t), run); err != nil {
		t.Fatal(err)
	}
	s.waitNoProcesses(t, "run/stop")
}}
