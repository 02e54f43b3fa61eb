package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/procfs"

	"github.com/berth-dev/berth/orchestrator"
)

// copyProject copies one of the lsp package's testdata projects into a
// fresh directory, so servers never write into the repository.
func copyProject(t *testing.T, name string) string {
	t.Helper()
	from := filepath.Join("..", "orchestrator", "lsp", "testdata", name)
	to, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return to
}

// serversIn lists the live processes whose working directory is dir or
// inside it.
func serversIn(dir string) []procfs.Process {
	return procfs.Filter(func(p procfs.Process) bool {
		cwd := p.Cwd()
		return p.Live() && (cwd == dir || strings.HasPrefix(cwd, dir+"/"))
	})
}

// The language-server tools through the binary: a query, diagnostics on
// write over files/willWrite and files/didWrite, a rename, and run/stop
// ending gopls.
func TestLSPThroughTheProtocol(t *testing.T) {
	dir := copyProject(t, "go")
	c := startStdio(t)
	run := newRun(t, c, dir, nil)
	ctx := testCtx(t)

	res := callTool(t, c, run, "lsp", map[string]any{"action": "definition", "file": "main.go", "line": 11, "symbol": "g.Greet"})
	if res.IsError || !strings.Contains(text(res), "greet/greet.go:6:2: Greet(name string) string") {
		t.Fatalf("definition: %s", text(res))
	}
	res = callTool(t, c, run, "lsp", map[string]any{"action": "definition", "file": "main.go", "line": 11})
	if !res.IsError || !strings.Contains(text(res), `definition needs "symbol"`) {
		t.Errorf("a navigation action without symbol: %s", text(res))
	}

	write := func(content string) *orchestrator.WriteReport {
		t.Helper()
		if err := c.WillWrite(ctx, run, []string{"main.go"}); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		rep, err := c.DidWrite(ctx, run, []string{"main.go"})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	orig, err := os.ReadFile(filepath.Join(dir, "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(orig), "func main() {", "var count int = \"three\"\n\nfunc main() {", 1)
	if rep := write(bad); rep.State != orchestrator.WriteIssues || len(rep.Diagnostics) != 1 || rep.Diagnostics[0].Line != 9 {
		t.Errorf("new error: %s %+v", rep.State, rep.Diagnostics)
	}
	if rep := write("// moved\n" + bad); rep.State != orchestrator.WriteClean {
		t.Errorf("the same error moved: want clean, got %s: %s", rep.State, rep.Text)
	}
	if rep := write(string(orig)); rep.State != orchestrator.WriteClean {
		t.Errorf("fixed: %s: %s", rep.State, rep.Text)
	}

	res = callTool(t, c, run, "lsp_rename", map[string]any{"file": "greet/greet.go", "line": 21, "symbol": "func Hello", "new_name": "Salute"})
	if res.IsError || !strings.Contains(text(res), "main.go: 3 edit(s)") {
		t.Errorf("rename: %s", text(res))
	}
	for _, s := range []orchestrator.Surface{orchestrator.SurfacePlan, orchestrator.SurfaceReadonly} {
		names := "," + strings.Join(toolNames(t, c, run, s), ",") + ","
		if !strings.Contains(names, ",lsp,") || strings.Contains(names, ",lsp_rename,") {
			t.Errorf("%s surface lists %s: want lsp and not lsp_rename", s, names)
		}
	}

	if len(serversIn(dir)) == 0 {
		t.Fatal("no gopls runs in the workdir")
	}
	if err := c.StopRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); len(serversIn(dir)) > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("processes left in the workdir after run/stop: %v", serversIn(dir))
		}
	}
}
