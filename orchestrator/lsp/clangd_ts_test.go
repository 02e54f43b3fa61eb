package lsp

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/berth-dev/berth/orchestrator"
)

// TestClangd runs clangd, which negotiates UTF-8 columns.
func TestClangd(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "c", DefaultConfig())
	q := func(action, file string, line int, symbol string) map[string]any {
		return map[string]any{"action": action, "file": file, "line": line, "symbol": symbol}
	}
	contains(t, f.ok(t, map[string]any{"action": "status", "file": "main.c"}), "main.c is served by clangd with root .")
	// The second greet( follows non-ASCII text on the same line.
	contains(t, f.ok(t, q("definition", "main.c", 12, `; greet(`)), "greet.h:5:5: int greet(const char *name, char *out, int size);")
	contains(t, f.ok(t, q("type_definition", "main.c", 11, "point p")), "main.c:5:8: struct point {")
	contains(t, f.ok(t, q("references", "main.c", 11, "point p")), "main.c:11:15: struct point p = {1, 2};", "main.c:12:53: greet(")
	contains(t, f.ok(t, q("references", "main.c", 11, "struct point")), "main.c:5:8: struct point {", "main.c:11:9: struct point p")
	contains(t, f.ok(t, q("hover", "main.c", 12, `; greet(`)), "int greet(const char *name, char *out, int size)")
	contains(t, f.ok(t, map[string]any{"action": "symbols", "file": "main.c"}), "class point (line 5) struct", "  field x (line 6) int", "function main (line 9) int (void)")
	contains(t, f.ok(t, map[string]any{"action": "status"}), "clangd for root .: ready", "positions in utf-8")

	orig := f.read(t, "main.c")
	bad := strings.Replace(orig, "\tputs(buf);", "\tputs(buf, 1);", 1)
	rep := f.write(t, "main.c", bad)
	if rep.State != orchestrator.WriteIssues || len(rep.Diagnostics) != 1 || !strings.Contains(rep.Diagnostics[0].Message, "Too many arguments") {
		t.Fatalf("new error: got %s %+v\n%s", rep.State, rep.Diagnostics, rep.Text)
	}
	contains(t, f.ok(t, q("code_actions", "main.c", 13, "puts")), "code actions of \"puts\" at main.c:13")
	if rep = f.write(t, "main.c", orig); rep.State != orchestrator.WriteClean {
		t.Errorf("fixed: want clean, got %s: %s", rep.State, rep.Text)
	}
	text, isErr := f.call(t, "lsp_rename", map[string]any{"file": "main.c", "line": 10, "symbol": "buf", "new_name": "line"})
	if isErr {
		t.Fatal(text)
	}
	contains(t, text, "main.c: 5 edit(s)")
	contains(t, f.read(t, "main.c"), `greet("wörld 🌍", line, sizeof line); greet("x", line, p.x);`)
	contains(t, f.ok(t, map[string]any{"action": "diagnostics", "file": "*"}), "0 problem(s)")
}

// TestTypeScript runs typescript-language-server.
func TestTypeScript(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "ts", DefaultConfig())
	q := func(action, file string, line int, symbol string) map[string]any {
		return map[string]any{"action": action, "file": file, "line": line, "symbol": symbol}
	}
	contains(t, f.ok(t, q("definition", "src/greet.ts", 15, "new English")), "src/greet.ts:7:14: export class English implements Greeter {")
	contains(t, f.ok(t, q("implementation", "src/greet.ts", 2, "Greeter")), "src/greet.ts:7:14: export class English implements Greeter {")
	contains(t, f.ok(t, q("type_definition", "src/main.ts", 3, "const g")), "src/greet.ts:2:18: export interface Greeter {")
	contains(t, f.ok(t, q("references", "src/greet.ts", 14, "hello")), "src/main.ts:1:28:", "src/main.ts:4:33:", "src/main.ts:5:13:", "src/main.ts:5:29:")
	contains(t, f.ok(t, q("hover", "src/main.ts", 5, "log(hello")), "hello(name: string): string", "hello greets name in English.")
	contains(t, f.ok(t, map[string]any{"action": "symbols", "file": "src/greet.ts"}), "interface Greeter (line 2)", "class English (line 7)", "  method greet (line 8)", "function hello (line 14)")

	orig := f.read(t, "src/greet.ts")
	rep := f.write(t, "src/greet.ts", strings.Replace(orig, "export function hello(name: string)", "export function hello(name: string, loud: boolean)", 1))
	var callers int
	for _, d := range rep.Diagnostics {
		if d.Path == "src/main.ts" && strings.Contains(d.Message, "Expected 2 arguments") {
			callers++
		}
	}
	if rep.State != orchestrator.WriteIssues || callers != 3 {
		t.Errorf("signature change: want the 3 broken calls in src/main.ts, got %s:\n%s", rep.State, rep.Text)
	}
	if rep = f.write(t, "src/greet.ts", orig); rep.State != orchestrator.WriteClean {
		t.Errorf("restored: want clean, got %s: %s", rep.State, rep.Text)
	}
	contains(t, rep.Text, "typescript-language-server reports only on files it has open")
	text, isErr := f.call(t, "lsp_rename", map[string]any{"file": "src/greet.ts", "line": 14, "symbol": "function hello", "new_name": "salute"})
	if isErr {
		t.Fatal(text)
	}
	contains(t, text, "src/greet.ts: 1 edit(s)", "src/main.ts: 4 edit(s)")
	contains(t, f.read(t, "src/main.ts"), `console.log(salute("again"), salute("twice"));`)
	contains(t, f.ok(t, map[string]any{"action": "diagnostics", "file": "*"}), "tsc --noEmit --pretty false (exit 0): 0 problem(s)")
}

// tsserver is asked whether the project of a file has loaded at the
// first query, and not again: about the same file or a file opened for
// a later query, tsserver answers after loading (or reloading) the
// file's project, if it must, in order, and the answer is complete. The
// probe cost every references 0.5 ms, the first of a run 1-1.5 ms, and
// the first about a newly opened file 2.5-6.8 ms.
//
// Issue 28: the first call of a second run, and of a first.
func TestTsserverIsAskedWhetherItsProjectLoadedOnlyUntilItFirstAnswers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "ts", DefaultConfig())
	probes := func() uint64 {
		var m dto.Metric
		if err := f.p.metrics.LSPRequestDuration.WithLabelValues("typescript-language-server", "workspace/executeCommand").(prometheus.Histogram).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetHistogram().GetSampleCount()
	}
	refs := func(file string, line int, symbol string) string {
		t.Helper()
		return f.ok(t, map[string]any{"action": "references", "file": file, "line": line, "symbol": symbol})
	}
	refs("src/greet.ts", 14, "hello")
	if n := probes(); n != 1 {
		t.Fatalf("the first references: %d probes, want 1", n)
	}
	refs("src/greet.ts", 14, "hello")
	refs("src/greet.ts", 2, "Greeter")
	if n := probes(); n != 1 {
		t.Errorf("two more references about the open src/greet.ts: %d probes in all, want still 1", n)
	}
	text := refs("src/main.ts", 3, "English")
	contains(t, text, "src/greet.ts:7", "src/greet.ts:15", "src/main.ts:1", "src/main.ts:3")
	if strings.Contains(text, "incomplete") {
		t.Errorf("references about src/main.ts say they may be incomplete:\n%s", text)
	}
	if n := probes(); n != 1 {
		t.Errorf("references about src/main.ts, opened for it once the project had loaded: %d probes in all, want still 1", n)
	}
}
