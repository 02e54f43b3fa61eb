package e2e

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// evalConfig names Debian's python (the one with pandas and matplotlib)
// and a short idle budget, so the budget's two sides show quickly.
const evalConfig = "kernels:\n  python: /usr/bin/python3\n  cell_idle_budget: 3s\n  interrupt_grace: 2s\n"

// evalCell runs one cell through tools/call.
func evalCell(t *testing.T, c *rpc.Client, run, lang, code string) *orchestrator.Result {
	t.Helper()
	return callTool(t, c, run, "eval", map[string]any{"code": code, "language": lang, "description": "run one cell for the end to end test"})
}

// interpretersIn lists the live python and node processes working inside
// dir (processesIn is the debug test's).
func interpretersIn(dir string) []string {
	return slices.DeleteFunc(processesIn(dir), func(p string) bool {
		return !strings.Contains(p, "python") && !strings.Contains(p, "node")
	})
}

// eval through the real binary: cells on both kernels, a table and a
// figure, tool() re-entry over harness/callTool answered and refused, the
// idle budget suspended by a slow bridge call but interrupting a silent
// loop, and run/stop leaving no interpreter behind.
func TestEvalThroughProtocol(t *testing.T) {
	c := startWithConfig(t, evalConfig)
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
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	run := newRun(t, c, dir, nil)
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

	if len(interpretersIn(dir)) != 2 {
		t.Fatalf("want a python and a node kernel in %s, found %v", dir, interpretersIn(dir))
	}
	if err := c.StopRun(testCtx(t), run); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(processesIn(dir)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("processes left after run/stop: %v", processesIn(dir))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
