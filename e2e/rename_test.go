package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-dev/berth/orchestrator/rpc"
)

// TestContainersColdCRenameLinks: in a berth/full container, lsp_rename
// as clangd's first call renames a function declared in stats.h, defined
// in stats.c and called in main.c in all three files, and the project
// links with the container's gcc after it. clangd knows only the files
// it has open: it wrote 1 edit in 1 file and the project no longer
// linked (issue 24 item 8).
func TestContainersColdCRenameLinks(t *testing.T) {
	runFamily(t, inContainer(fullImage), family{name: "c-rename", check: func(t *testing.T, c *rpc.Client, s *site) {
		copyProjectInto(t, "cstats", s.Dir)
		run := s.start(t, c, nil)
		res := callTool(t, c, run, "lsp_rename", map[string]any{"file": "stats.h", "line": 4, "symbol": "stats_add", "new_name": "stats_put"})
		got := text(res)
		t.Logf("cold rename in %s:\n%s", s.place, got)
		if res.IsError {
			t.Fatalf("cold rename refused: %s", got)
		}
		for _, w := range []string{`Renamed "stats_add" to "stats_put": 4 edit(s) in 3 file(s). No new problems: cc/c++ -fsyntax-only found none`,
			"main.c: 2 edit(s)", "stats.c: 1 edit(s)", "stats.h: 1 edit(s)"} {
			if !strings.Contains(got, w) {
				t.Errorf("want %q in:\n%s", w, got)
			}
		}
		for _, f := range []string{"stats.h", "stats.c", "main.c"} {
			b, err := os.ReadFile(filepath.Join(s.Dir, f))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), "stats_add") {
				t.Errorf("%s still names stats_add:\n%s", f, b)
			}
		}
		s.run(t, "gcc", "-Wall", "-o", "/tmp/prog", "stats.c", "main.c")
		if err := c.StopRun(testCtx(t), run); err != nil {
			t.Fatal(err)
		}
		s.waitNoProcesses(t, "run/stop")
	}})
}
