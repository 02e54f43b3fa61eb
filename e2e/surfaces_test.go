package e2e

import (
	"slices"
	"strings"
	"testing"

	"github.com/berth-dev/berth/orchestrator"
)

// Plan and readonly surfaces list only read-tier tools, and a call to a
// higher tier from them is refused, not just hidden.
func TestSurfacesAndTiers(t *testing.T) {
	c := startStdio(t, testTools)
	run := newRun(t, c, "", nil)

	full := toolNames(t, c, run, orchestrator.SurfaceFull)
	for _, want := range []string{"test_echo", "test_write", "test_exec"} {
		if !slices.Contains(full, want) {
			t.Errorf("full surface lacks %s: %v", want, full)
		}
	}
	for _, s := range []orchestrator.Surface{orchestrator.SurfacePlan, orchestrator.SurfaceReadonly} {
		tools, err := c.ListTools(testCtx(t), run, s)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range tools {
			names = append(names, tl.Name)
			if tl.Tier != "read" {
				t.Errorf("%s surface lists %s of tier %s", s, tl.Name, tl.Tier)
			}
		}
		if !slices.Contains(names, "test_echo") {
			t.Errorf("%s surface lacks the read tool test_echo: %v", s, names)
		}
		for _, name := range []string{"test_write", "test_exec"} {
			res := callToolOn(t, c, run, s, name, map[string]any{"path": "x", "content": "y", "argv": []string{"true"}})
			if !res.IsError || !strings.Contains(text(res), "not allowed on the "+string(s)+" surface") {
				t.Errorf("%s on %s: want a refusal, got %+v", name, s, res)
			}
		}
	}
	res := callTool(t, c, run, "test_echo", map[string]string{"text": "hello"})
	if res.IsError || text(res) != "hello" {
		t.Errorf("test_echo: %+v", res)
	}
}
