package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// copyProject copies one of the lsp package's testdata projects into a
// fresh directory, so servers never write into the repository.
func copyProject(t *testing.T, name string) string {
	t.Helper()
	to, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	copyProjectInto(t, name, to)
	return to
}

// copyProjectInto copies the lsp package's testdata project name into
// the directory to.
func copyProjectInto(t *testing.T, name, to string) {
	t.Helper()
	copyTree(t, filepath.Join("..", "orchestrator", "lsp", "testdata", name), to)
}

// copyTree copies the tree from (a directory of the repository) into to.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
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
}

// The language-server tools through the binary: a query, diagnostics on
// write over files/willWrite and files/didWrite, a rename, and run/stop
// ending gopls.
func TestLSPThroughTheProtocol(t *testing.T) { runFamily(t, onHost, lspGo) }

var lspGo = family{name: "lsp-go", check: func(t *testing.T, c *rpc.Client, s *site) {
	copyProjectInto(t, "go", s.Dir)
	dir := s.Dir
	run := s.start(t, c, nil)
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

	if !slices.ContainsFunc(s.processes(t), func(p string) bool { return strings.Contains(p, "gopls") }) {
		t.Fatalf("no gopls runs in %s: %v", s.place, s.processes(t))
	}
	if err := c.StopRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	s.waitNoProcesses(t, "run/stop")
}}

// The other language servers through the binary, with checks taken from
// the lsp package's own tests of each (python_test.go, clangd_ts_test.go):
// a definition and references with positions right after non-ASCII text,
// an error written and fixed over files/willWrite and didWrite, and a
// rename. Run/stop ends the server.
func TestLSPLanguagesThroughTheProtocol(t *testing.T) {
	for _, f := range lspLanguages {
		t.Run(f.name, func(t *testing.T) { runFamily(t, onHost, f) })
	}
}

// lspLanguage is one language server's checks on a testdata project.
type lspLanguage struct {
	project, server string
	queries         []lspQuery
	// file gets the broken text (old replaced by bad); issue checks the
	// report; file is then written back, which must be clean.
	file, old, bad string
	issue          func(rep *orchestrator.WriteReport) bool
	rename         map[string]any
	renamed        []string // in the rename's answer
}

type lspQuery struct {
	args map[string]any
	want []string
}

func q(action, file string, line int, symbol string, want ...string) lspQuery {
	return lspQuery{map[string]any{"action": action, "file": file, "line": line, "symbol": symbol}, want}
}

var lspLanguages = []family{
	lspLanguage{
		project: "py", server: "pyright",
		queries: []lspQuery{
			q("definition", "main.py", 4, "g.greet", "greet.py:7:9: def greet(self, name: str) -> str:"),
			q("definition", "main.py", 4, "hello(", "greet.py:12:5: def hello(name: str) -> str:"),
			q("references", "greet.py", 12, "def hello", "greet.py:12:5:", "main.py:1:28:", "main.py:4:27:", "main.py:5:7:", "main.py:5:23:"),
		},
		file: "main.py", old: "\n", bad: "\nprint(undefined_name)\n",
		issue: func(rep *orchestrator.WriteReport) bool {
			return len(rep.Diagnostics) == 1 && strings.Contains(rep.Diagnostics[0].Message, `"undefined_name" is not defined`)
		},
		rename:  map[string]any{"file": "greet.py", "line": 12, "symbol": "def hello", "new_name": "salute"},
		renamed: []string{"greet.py: 1 edit(s)", "main.py: 4 edit(s)"},
	}.family(),
	lspLanguage{
		project: "c", server: "clangd",
		queries: []lspQuery{
			q("definition", "main.c", 12, `; greet(`, "greet.h:5:5: int greet(const char *name, char *out, int size);"),
			q("references", "main.c", 11, "point p", "main.c:11:15: struct point p = {1, 2};", "main.c:12:53: greet("),
		},
		file: "main.c", old: "\tputs(buf);", bad: "\tputs(buf, 1);",
		issue: func(rep *orchestrator.WriteReport) bool {
			return len(rep.Diagnostics) == 1 && strings.Contains(rep.Diagnostics[0].Message, "Too many arguments")
		},
		rename:  map[string]any{"file": "main.c", "line": 10, "symbol": "buf", "new_name": "line"},
		renamed: []string{"main.c: 5 edit(s)"},
	}.family(),
	lspLanguage{
		project: "ts", server: "typescript-language-server",
		queries: []lspQuery{
			q("definition", "src/greet.ts", 15, "new English", "src/greet.ts:7:14: export class English implements Greeter {"),
			// Opens src/main.ts, whose calls the broken signature breaks:
			// the server reports only on open files.
			q("type_definition", "src/main.ts", 3, "const g", "src/greet.ts:2:18: export interface Greeter {"),
			q("references", "src/greet.ts", 14, "hello", "src/main.ts:1:28:", "src/main.ts:4:33:", "src/main.ts:5:13:", "src/main.ts:5:29:"),
		},
		file: "src/greet.ts", old: "export function hello(name: string)", bad: "export function hello(name: string, loud: boolean)",
		issue: func(rep *orchestrator.WriteReport) bool {
			n := 0
			for _, d := range rep.Diagnostics {
				if d.Path == "src/main.ts" && strings.Contains(d.Message, "Expected 2 arguments") {
					n++
				}
			}
			return n == 3
		},
		rename:  map[string]any{"file": "src/greet.ts", "line": 14, "symbol": "function hello", "new_name": "salute"},
		renamed: []string{"src/greet.ts: 1 edit(s)", "src/main.ts: 4 edit(s)"},
	}.family(),
}

func (l lspLanguage) family() family {
	return family{name: "lsp-" + l.project, check: func(t *testing.T, c *rpc.Client, s *site) {
		copyProjectInto(t, l.project, s.Dir)
		run := s.start(t, c, nil)
		ctx := testCtx(t)
		stopped := false
		defer func() {
			if t.Failed() && !stopped { // what the server said, for the reader
				t.Logf("lsp status:\n%s", text(callTool(t, c, run, "lsp", map[string]any{"action": "status"})))
			}
		}()
		res := callTool(t, c, run, "lsp", map[string]any{"action": "status", "file": l.file})
		if !strings.Contains(text(res), "is served by "+l.server+" with root .") {
			t.Fatalf("status: %s", text(res))
		}
		for _, qu := range l.queries {
			res := callTool(t, c, run, "lsp", qu.args)
			for _, w := range qu.want {
				if res.IsError || !strings.Contains(text(res), w) {
					t.Fatalf("lsp %v: want %q in:\n%s", qu.args, w, text(res))
				}
			}
		}
		write := func(content string) *orchestrator.WriteReport {
			t.Helper()
			if err := c.WillWrite(ctx, run, []string{l.file}); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(s.Dir, l.file), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			rep, err := c.DidWrite(ctx, run, []string{l.file})
			if err != nil {
				t.Fatal(err)
			}
			return rep
		}
		orig, err := os.ReadFile(filepath.Join(s.Dir, l.file))
		if err != nil {
			t.Fatal(err)
		}
		if rep := write(strings.Replace(string(orig), l.old, l.bad, 1)); rep.State != orchestrator.WriteIssues || !l.issue(rep) {
			t.Errorf("the error written: %s %+v\n%s", rep.State, rep.Diagnostics, rep.Text)
		}
		if rep := write(string(orig)); rep.State != orchestrator.WriteClean {
			t.Errorf("fixed: %s: %s", rep.State, rep.Text)
		}
		res = callTool(t, c, run, "lsp_rename", l.rename)
		for _, w := range l.renamed {
			if res.IsError || !strings.Contains(text(res), w) {
				t.Errorf("rename: want %q in:\n%s", w, text(res))
			}
		}
		if t.Failed() {
			return // the deferred status says why
		}
		stopped = true
		if err := c.StopRun(ctx, run); err != nil {
			t.Fatal(err)
		}
		s.waitNoProcesses(t, "run/stop")
	}}
}
