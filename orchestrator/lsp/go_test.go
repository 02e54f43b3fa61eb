package lsp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.lsp.dev/protocol"

	"github.com/berth-dev/berth/orchestrator"
)

// TestGopls runs every action, the position rules, diagnostics on write,
// a rename and a crash against one real gopls (one server for the whole
// test keeps it quick on a small machine).
func TestGopls(t *testing.T) {
	f := newFixture(t, "go", DefaultConfig())
	q := func(action, file string, line int, symbol string) map[string]any {
		return map[string]any{"action": action, "file": file, "line": line, "symbol": symbol}
	}

	t.Run("actions", func(t *testing.T) {
		cases := []struct {
			args map[string]any
			want []string
		}{
			{q("definition", "main.go", 11, "g.Greet"), []string{"definition of \"g.Greet\" at main.go:11: 1", "greet/greet.go:6:2: Greet(name string) string"}},
			{q("type_definition", "main.go", 10, "var g"), []string{"greet/greet.go:5:6: type Greeter interface {"}},
			{q("implementation", "greet/greet.go", 5, "Greeter"), []string{"greet/greet.go:10:6: type English struct{ Excited bool }"}},
			{q("references", "greet/greet.go", 21, "Hello"), []string{"references of \"Hello\" at greet/greet.go:21: 4",
				"greet/greet.go:21:6: func Hello(name string) string {", "main.go:13:20:", "main.go:13:42:"}},
			{q("hover", "main.go", 12, "greet.Hello"), []string{"func greet.Hello(name string) string", "Hello greets name in English."}},
			{map[string]any{"action": "symbols", "file": "greet/greet.go"}, []string{"symbols in greet/greet.go: 6",
				"interface Greeter (line 5)", "  method Greet (line 6)", "struct English (line 10)", "  field Excited (line 10)", "function Hello (line 21)"}},
			{map[string]any{"action": "symbols", "query": "Greet"}, []string{"workspace symbols matching \"Greet\"", "interface Greeter", "— greet/greet.go:5:6"}},
			{map[string]any{"action": "symbols", "query": "Hello", "file": "main.go"}, []string{"function Hello", "— greet/greet.go:21:6"}},
			{q("code_actions", "main.go", 10, "greet.English{"), []string{"code actions of \"greet.English{\" at main.go:10"}},
			{map[string]any{"action": "diagnostics", "file": "main.go"}, []string{"main.go: no errors or warnings from gopls"}},
			{map[string]any{"action": "diagnostics", "file": "*"}, []string{"go vet ./... (exit 0): 0 problem(s)"}},
		}
		for _, c := range cases {
			contains(t, f.ok(t, c.args), c.want...)
		}
		// Each request's time is kept, by server and method, apart from
		// rendering its answer.
		for _, method := range []string{"textDocument/definition", "textDocument/references", "workspace/symbol"} {
			h := f.p.metrics.LSPRequestDuration.WithLabelValues("gopls", method).(prometheus.Histogram)
			var m dto.Metric
			if err := h.Write(&m); err != nil || m.GetHistogram().GetSampleCount() == 0 {
				t.Errorf("berth_lsp_request_duration_seconds{server=gopls,method=%s}: no sample (%v)", method, err)
			}
		}
	})

	t.Run("positions", func(t *testing.T) {
		// The line holds non-ASCII text before the symbol: the column sent
		// must count it in the negotiated encoding (UTF-16 for gopls).
		contains(t, f.ok(t, q("definition", "main.go", 12, "Hello")), "greet/greet.go:21:6: func Hello(name string) string {")
		contains(t, f.ok(t, q("references", "main.go", 12, "Hello")), "main.go:12:31: fmt.Println(\"héllo 🌍\", greet.Hello(\"wörld\"))")
		cases := []struct {
			args map[string]any
			want []string
		}{
			{q("definition", "main.go", 13, "greet.Hello"), []string{`"greet.Hello" occurs 2 times in line 13`, "13 | \tfmt.Println(", "Pass a longer substring"}},
			{q("definition", "main.go", 11, "Nope"), []string{`"Nope" does not occur in line 11`, "11 | \tfmt.Println(g.Greet(\"world\"))"}},
			{q("definition", "main.go", 99, "x"), []string{"line 99 is outside the file, which has 14 lines"}},
			{map[string]any{"action": "definition", "file": "main.go", "line": 11}, []string{`definition needs "symbol"`}},
			{map[string]any{"action": "hover", "file": "main.go"}, []string{`hover needs "line" and "symbol"`}},
			{q("hover", "nowhere.go", 1, "x"), []string{`file "nowhere.go" does not exist`}},
			{q("hover", "../etc/passwd", 1, "x"), []string{"outside the working directory"}},
			{map[string]any{"action": "symbols"}, []string{`symbols needs "query"`}},
		}
		for _, c := range cases {
			contains(t, f.fails(t, c.args), c.want...)
		}
		text, _ := f.call(t, "lsp", map[string]any{"action": "definition", "file": "main.go", "line": 11, "symbol": "x", "column": 3})
		contains(t, text, "column")
	})

	// Issue 11 item 10.
	t.Run("whole identifiers win over longer ones", func(t *testing.T) {
		// "Greet" is only inside Greeter on line 10: refused, naming it,
		// and the hint it proposes lands on it.
		contains(t, f.fails(t, q("definition", "main.go", 10, "Greet")),
			`"Greet" occurs in line 10 only inside a longer identifier (Greeter)`, `column 14 (Greeter): "Greeter"`)
		contains(t, f.ok(t, q("definition", "main.go", 10, "Greeter")), "greet/greet.go:5:6: type Greeter interface {")
		// Each hint for the twice-called greet.Hello lands on its own call.
		text := f.fails(t, q("references", "main.go", 13, "greet.Hello"))
		for _, hint := range []string{"(greet.Hello", ", greet.Hello"} {
			contains(t, text, strconv.Quote(hint))
			contains(t, f.ok(t, q("references", "main.go", 13, hint)), "references of "+strconv.Quote(hint)+" at main.go:13: 4")
		}
	})

	t.Run("diagnostics on write", func(t *testing.T) {
		orig := f.read(t, "main.go")
		bad := strings.Replace(orig, "func main() {", "var count int = \"three\"\n\nfunc main() {", 1)
		rep := f.write(t, "main.go", bad)
		if rep.State != orchestrator.WriteIssues || len(rep.Diagnostics) != 1 {
			t.Fatalf("new error: want 1 new diagnostic and state issues, got %s: %+v\n%s", rep.State, rep.Diagnostics, rep.Text)
		}
		d := rep.Diagnostics[0]
		if d.Path != "main.go" || d.Line != 9 || d.Severity != "error" || !strings.Contains(d.Message, "cannot use \"three\"") {
			t.Errorf("diagnostic: %+v", d)
		}
		contains(t, rep.Text, "This write introduced 1 new problem(s):", "main.go:9:17: error: cannot use \"three\"")

		moved := strings.Replace(bad, "var count", "// one\n// two\n// three\n// four\nvar count", 1)
		if rep = f.write(t, "main.go", moved); rep.State != orchestrator.WriteClean || len(rep.Diagnostics) != 0 {
			t.Fatalf("moved down four lines: want clean and nothing new, got %s: %s", rep.State, rep.Text)
		}
		if rep = f.write(t, "main.go", orig); rep.State != orchestrator.WriteClean {
			t.Fatalf("fixed: want clean, got %s: %s", rep.State, rep.Text)
		}
		if rep = f.write(t, "main.go", bad); rep.State != orchestrator.WriteIssues || len(rep.Diagnostics) != 1 {
			t.Fatalf("reintroduced: want it reported again, got %s: %s", rep.State, rep.Text)
		}
		contains(t, f.ok(t, map[string]any{"action": "diagnostics", "file": "*"}), "go vet ./... (exit 1): 1 problem(s)", "main.go:9:17: cannot use \"three\"")
		contains(t, f.ok(t, map[string]any{"action": "diagnostics", "file": "main.go"}), "main.go: 1 error(s) and warning(s) from gopls", "main.go:9:17: error: cannot use")
		f.write(t, "main.go", orig)

		// A changed signature breaks the callers in another file.
		greet := f.read(t, "greet/greet.go")
		defer func() {
			if t.Failed() { // the next subtests start from the original
				_ = os.WriteFile(filepath.Join(f.dir, "greet/greet.go"), []byte(greet), 0o644)
			}
		}()
		rep = f.write(t, "greet/greet.go", strings.Replace(greet, "func Hello(name string) string {\n\treturn English{}.Greet(name)",
			"func Hello(name string, loud bool) string {\n\treturn English{Excited: loud}.Greet(name)", 1))
		if rep.State != orchestrator.WriteIssues {
			t.Fatalf("signature change: want issues, got %s: %s", rep.State, rep.Text)
		}
		callers := 0
		for _, d := range rep.Diagnostics {
			if d.Path == "main.go" && strings.Contains(d.Message, "not enough arguments in call to greet.Hello") {
				callers++
			}
		}
		if callers != 3 {
			t.Errorf("want the 3 broken calls in main.go, got %d:\n%s", callers, rep.Text)
		}
		if rep = f.write(t, "greet/greet.go", greet); rep.State != orchestrator.WriteClean {
			t.Errorf("signature restored: want clean, got %s: %s", rep.State, rep.Text)
		}
		if n := testutil.ToFloat64(f.p.metrics.Diagnostics.WithLabelValues("new")); n != 5 {
			t.Errorf("berth_diagnostics_total{disposition=\"new\"} = %v, want 5 (the error twice, the 3 broken calls)", n)
		}
		if n := testutil.ToFloat64(f.p.metrics.Diagnostics.WithLabelValues("suppressed")); n != 1 {
			t.Errorf("berth_diagnostics_total{disposition=\"suppressed\"} = %v, want 1 (the moved error)", n)
		}
	})

	t.Run("rename across files", func(t *testing.T) {
		// A failure part-way through writing leaves every file as it was.
		before := f.read(t, "main.go") + f.read(t, "greet/greet.go")
		renames := 0
		f.p.Writer.Rename = func(from, to string) error {
			if renames++; renames == 2 {
				return errors.New("disk full (injected)")
			}
			return os.Rename(from, to)
		}
		text, isErr := f.call(t, "lsp_rename", map[string]any{"file": "greet/greet.go", "line": 21, "symbol": "func Hello", "new_name": "Salute"})
		f.p.Writer.Rename = nil
		if !isErr || !strings.Contains(text, "disk full (injected)") {
			t.Errorf("an injected write failure: want an error result, got:\n%s", text)
		}
		if after := f.read(t, "main.go") + f.read(t, "greet/greet.go"); after != before {
			t.Fatal("a failed rename changed files")
		}

		text, isErr = f.call(t, "lsp_rename", map[string]any{"file": "greet/greet.go", "line": 21, "symbol": "func Hello", "new_name": "Salute"})
		if isErr {
			t.Fatal(text)
		}
		// go vet finds nothing new; the old name is left in two strings,
		// which the search for it shows rather than call the rename clean.
		contains(t, text, "Renamed \"func Hello\" to \"Salute\": 5 edit(s) in 2 file(s). Check it: \"Hello\" still occurs 2 time(s) in go files",
			"greet/greet.go: 2 edit(s)", "main.go: 3 edit(s)", `greet/greet.go:15:11: return "Hello, " + name + "!"`)
		contains(t, f.read(t, "main.go"), `greet.Salute("wörld")`, `greet.Salute("again"), greet.Salute("twice")`)
		contains(t, f.read(t, "greet/greet.go"), "// Salute greets name in English.\nfunc Salute(name string) string {")
		contains(t, f.ok(t, q("definition", "main.go", 12, "greet.Salute(")), "greet/greet.go:21:6: func Salute(name string) string {")
		text, _ = f.call(t, "lsp_rename", map[string]any{"file": "main.go", "line": 11, "symbol": "Println", "new_name": "Say"})
		contains(t, text, "outside the working directory", "print.go", "nothing was written")
	})

	t.Run("a write the harness did not report", func(t *testing.T) {
		// Another file changes on disk behind the server's back: a query
		// re-syncs open documents first, so it sees the new lines.
		greet := f.read(t, "greet/greet.go")
		if err := os.WriteFile(filepath.Join(f.dir, "greet/greet.go"), []byte(strings.Replace(greet, "// Salute greets", "// (moved)\n// Salute greets", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		contains(t, f.ok(t, q("definition", "main.go", 12, "greet.Salute(")), "greet/greet.go:22:6: func Salute(name string) string {")
	})

	t.Run("killed server restarts", func(t *testing.T) {
		sv := f.p.state(f.run).sv
		var s *server
		for _, sl := range sv.snapshot() {
			s = sl.srv
		}
		if err := s.proc.handle.Kill(); err != nil {
			t.Fatal(err)
		}
		<-s.proc.exited
		contains(t, f.ok(t, q("definition", "main.go", 11, "g.Greet")), "greet/greet.go:6:2: Greet(name string) string")
		contains(t, f.ok(t, map[string]any{"action": "status"}), "gopls for root .: ready")
		if s2 := sv.snapshot()[0].srv; s2 == s {
			t.Error("the same dead server was reused")
		}
	})

	t.Run("reload", func(t *testing.T) {
		contains(t, f.ok(t, map[string]any{"action": "reload", "file": "main.go"}), "restarted gopls (root .)")
		contains(t, f.ok(t, q("hover", "main.go", 11, "g.Greet")), "func (greet.Greeter) Greet(name string) string")
	})

	t.Run("surfaces", func(t *testing.T) {
		for _, s := range []orchestrator.Surface{orchestrator.SurfacePlan, orchestrator.SurfaceReadonly} {
			var names []string
			for _, sp := range f.reg.List(f.run, s) {
				names = append(names, sp.Name)
			}
			if strings.Join(names, ",") != "lsp" {
				t.Errorf("%s surface lists %v, want only lsp", s, names)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := f.reg.Call(ctx, f.run, orchestrator.SurfacePlan, "lsp_rename", []byte(`{"file":"main.go","line":1,"symbol":"main","new_name":"x"}`))
		if err != nil || !res.IsError {
			t.Errorf("lsp_rename on the plan surface: want refused, got %v %+v", err, res)
		}
	})
}

// TestGoWorkspaceSymbolsListTheWorkspacesOwn: a Go workspace search lists the
// workspace's own symbols, not the standard library's (gopls answered
// 91 of its 100 from it), best matches first, and says when the server's
// own limit may have cut the list.
//
// Issue 11 item 13.
func TestGoWorkspaceSymbolsListTheWorkspacesOwn(t *testing.T) {
	dir := t.TempDir()
	dir, _ = filepath.EvalSymlinks(dir)
	copyTree(t, filepath.Join("testdata", "go"), dir)
	many := "package greet\n\n"
	for i := range 120 {
		many += fmt.Sprintf("func Read%d() {}\n", i)
	}
	for rel, text := range map[string]string{
		"greet/many.go":   many,
		"greet/reader.go": "package greet\n\n// Reader is the workspace's own; the standard library has a dozen.\ntype Reader struct{}\n\nfunc NewMemReader() *Reader { return &Reader{} }\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, rel), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f := newFixtureIn(t, dir, "run-symbols", DefaultConfig())

	text := f.ok(t, map[string]any{"action": "symbols", "query": "Reader"})
	lines := strings.Split(text, "\n")
	if lines[0] != `workspace symbols matching "Reader": 2` {
		t.Errorf("first line: want the workspace's 2 matches and no note, got %q", lines[0])
	}
	if len(lines) < 3 || !strings.HasPrefix(lines[1], "struct Reader ") || !strings.HasPrefix(lines[2], "function NewMemReader ") {
		t.Errorf("want the exact match first, then NewMemReader:\n%s", text)
	}

	text = f.ok(t, map[string]any{"action": "symbols", "query": "Read"})
	contains(t, strings.Split(text, "\n")[0], "gopls answers at most 100, so more may match: narrow the query")
	if strings.Contains(text, "outside the working directory") {
		t.Errorf("standard-library matches were searched:\n%s", text)
	}
}

func TestSymbolRank(t *testing.T) {
	order := []struct{ name, rel string }{
		{"Store", "store.go"},
		{"store", "store.go"},
		{"MemStore.StoreAll", "mem.go"}, // a method: its own name is a prefix match
		{"NewMemStore", "mem.go"},
		{"S_t_o_r_e", "fuzzy.go"},
		{"Store", "node_modules/x/index.d.ts"},
		{"Store", "vendor/x/x.go"},
	}
	for i := 1; i < len(order); i++ {
		a, b := order[i-1], order[i]
		if ra, rb := symbolRank(a.name, "Store", a.rel), symbolRank(b.name, "Store", b.rel); ra > rb {
			t.Errorf("%s in %s (%d) ranks after %s in %s (%d)", a.name, a.rel, ra, b.name, b.rel, rb)
		}
	}
}

// TestCodeActionsPutTheQuickFixFirst: code_actions puts gopls's quick fix
// first and leaves out its entries that change no code ("Browse …"),
// saying how many, unless asked for all.
//
// Issue 11 item 13.
func TestCodeActionsPutTheQuickFixFirst(t *testing.T) {
	dir := t.TempDir()
	dir, _ = filepath.EvalSymlinks(dir)
	copyTree(t, filepath.Join("testdata", "go"), dir)
	if err := os.WriteFile(filepath.Join(dir, "greet/up.go"), []byte("package greet\n\nfunc Up(s string) string {\n\treturn strings.ToUpper(s)\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newFixtureIn(t, dir, "run-actions", DefaultConfig())
	// The quick fix is offered for the diagnostic on the line.
	contains(t, f.ok(t, map[string]any{"action": "diagnostics", "file": "greet/up.go"}), "undefined: strings")
	q := map[string]any{"action": "code_actions", "file": "greet/up.go", "line": 4, "symbol": "strings"}

	text := f.ok(t, q)
	lines := strings.Split(text, "\n")
	contains(t, lines[0], `code actions of "strings" at greet/up.go:4: `, `with no edit, such as "`, `left out: pass "all": true to list them`)
	if len(lines) < 2 || !strings.HasPrefix(lines[1], `- Add import:`) || !strings.Contains(lines[1], "[quickfix]: edits 1 file(s)") {
		t.Errorf("want the quick fix first:\n%s", text)
	}
	if strings.Contains(text, "Browse") || strings.Contains(text, "source.doc") {
		t.Errorf("entries that change no code are listed:\n%s", text)
	}

	q["all"] = true
	text = f.ok(t, q)
	contains(t, text, "Browse documentation for func Up [source.doc]")
	if lines := strings.Split(text, "\n"); len(lines) < 2 || !strings.HasPrefix(lines[1], `- Add import:`) || strings.Contains(lines[0], "left out") {
		t.Errorf("all: want every entry, the quick fix first:\n%s", text)
	}
}

// Quick fixes come first whatever the server's order.
func TestCodeActionsOrder(t *testing.T) {
	kind := func(k protocol.CodeActionKind) *protocol.CodeActionKind { return &k }
	res := []protocol.CommandOrCodeAction{
		&protocol.CodeAction{Title: "Extract function", Kind: kind(protocol.CodeActionKindRefactorExtract)},
		&protocol.Command{Title: "Show something", Command: "x.show"},
		&protocol.CodeAction{Title: "Browse docs", Kind: kind("source.doc")},
		&protocol.CodeAction{Title: "Fix it", Kind: kind(protocol.CodeActionKindQuickFix), Edit: &protocol.WorkspaceEdit{}},
	}
	got := codeActionsText(res, "code actions", false)
	want := "code actions: 2 (2 more with no edit, such as \"Show something\", left out: pass \"all\": true to list them)\n" +
		"- Fix it [quickfix]: edits 0 file(s)\n- Extract function [refactor.extract]\n"
	if !strings.HasPrefix(got, want) {
		t.Errorf("got:\n%s\nwant it to begin:\n%s", got, want)
	}
	if got := codeActionsText(res[1:3], "code actions", false); !strings.HasPrefix(got, "code actions: none that change code (2 with no edit") {
		t.Errorf("only entries with no edit: %s", got)
	}
}

// The record of the diagnostics a run was told of is held in Berth's
// memory alone: in the run resumed after Berth restarted, the first
// write report says plainly that problems reported before the restart
// may be reported again as new (gopls re-reports an error the run had
// been told of, written again without files/willWrite), and the reports
// after it say nothing of the restart. A run that was not resumed never
// says it.
//
// Issue 29 item 3 (the run's diagnostics registry).
func TestFirstReportAfterARestartSaysEarlierProblemsMayReadAsNew(t *testing.T) {
	before := newFixture(t, "go", DefaultConfig())
	orig := before.read(t, "main.go")
	bad := strings.Replace(orig, "func main() {", "var count int = \"three\"\n\nfunc main() {", 1)
	rep := before.write(t, "main.go", bad)
	if rep.State != orchestrator.WriteIssues || strings.Contains(rep.Text, "Berth restarted") {
		t.Fatalf("the first report of a new run: %s: %s", rep.State, rep.Text)
	}
	before.run.End("Berth was killed")

	// The Berth that came next, the same run resumed on the same workdir.
	f := newFixtureIn(t, before.dir, "run-go", DefaultConfig())
	f.run.Resumed = true
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	again := strings.Replace(bad, "func main() {", "// a comment\nfunc main() {", 1)
	if err := os.WriteFile(filepath.Join(f.dir, "main.go"), []byte(again), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := f.p.DidWrite(ctx, f.run, []string{"main.go"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the first report after the restart: %s: %s", rep.State, rep.Text)
	contains(t, rep.Text, "cannot use \"three\"", restartedReport)
	if rep = f.write(t, "main.go", bad); rep.State != orchestrator.WriteClean || strings.Contains(rep.Text, "Berth restarted") {
		t.Errorf("the second report after the restart: %s: %s", rep.State, rep.Text)
	}
	f.write(t, "main.go", orig)
}

// A write to a Go file is reported once gopls has diagnosed the
// workspace for it (gopls.diagnose_files), importers included, with no
// listening for lsp.debounce after: here the debounce is a minute, so
// listening would last until lsp.diagnostics_timeout, and the report of
// a signature change that breaks the callers in another file comes well
// before that. A pull that failed would fall back to
// waiting for publishes and then the debounce.
//
// Issue 28: gopls keeps its diagnosticsDelay, so a document's first open
// runs no analyses beside the query that opened it.
func TestAGoWriteReportDoesNotWaitForTheDebounce(t *testing.T) {
	conf := DefaultConfig()
	conf.Debounce = time.Minute
	f := newFixture(t, "go", conf)
	greet := f.read(t, "greet/greet.go")
	start := time.Now()
	rep := f.write(t, "greet/greet.go", strings.Replace(greet, "func Hello(name string) string {\n\treturn English{}.Greet(name)",
		"func Hello(name string, loud bool) string {\n\treturn English{Excited: loud}.Greet(name)", 1))
	took := time.Since(start)
	callers := 0
	for _, d := range rep.Diagnostics {
		if d.Path == "main.go" && strings.Contains(d.Message, "not enough arguments in call to greet.Hello") {
			callers++
		}
	}
	if rep.State != orchestrator.WriteIssues || callers != 3 {
		t.Fatalf("signature change: want issues with the 3 broken calls in main.go, got %s, %d:\n%s", rep.State, callers, rep.Text)
	}
	// Listening would last the debounce, or lsp.diagnostics_timeout
	// (20 s) at most, since the publishes never fall quiet that long.
	if took >= conf.DiagnosticsTimeout/2 {
		t.Errorf("the report took %s: it listened for the debounce (%s, up to %s)", took.Round(time.Millisecond), conf.Debounce, conf.DiagnosticsTimeout)
	}
	if rep = f.write(t, "greet/greet.go", greet); rep.State != orchestrator.WriteClean {
		t.Errorf("signature restored: want clean, got %s: %s", rep.State, rep.Text)
	}
}

// A write that deletes a Go file its callers need reports the calls it
// broke: gopls is asked to diagnose the workspace for the deletion too,
// since a deletion publishes nothing of its own (gopls's first pass
// diagnoses open files only, and its second comes a second later).
//
// Issue 28: gopls keeps its diagnosticsDelay.
func TestDeletingAGoFileReportsTheCallsItBroke(t *testing.T) {
	f := newFixture(t, "go", DefaultConfig())
	if rep := f.write(t, "greet/extra.go", "package greet\n\n// Extra is needed by main.go.\nfunc Extra() string { return \"extra\" }\n"); rep.State != orchestrator.WriteClean {
		t.Fatalf("adding greet/extra.go: %s: %s", rep.State, rep.Text)
	}
	main := f.read(t, "main.go")
	uses := strings.Replace(main, "func main() {", "func main() {\n\tfmt.Println(greet.Extra())", 1)
	if rep := f.write(t, "main.go", uses); rep.State != orchestrator.WriteClean {
		t.Fatalf("calling greet.Extra: %s: %s", rep.State, rep.Text)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := f.p.WillWrite(ctx, f.run, []string{"greet/extra.go"}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(f.dir, "greet", "extra.go")); err != nil {
		t.Fatal(err)
	}
	rep, err := f.p.DidWrite(ctx, f.run, []string{"greet/extra.go"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.State != orchestrator.WriteIssues {
		t.Fatalf("deleting greet/extra.go: want issues, got %s: %s", rep.State, rep.Text)
	}
	contains(t, rep.Text, "main.go:", "undefined: greet.Extra")
}

// files/willWrite about several Go files asks gopls to diagnose them once,
// not once per file, and what each already had is its baseline: a write
// that leaves those problems as they were is clean.
//
// Issue 28: gopls keeps its diagnosticsDelay, and its diagnostics are
// pulled (gopls.diagnose_files).
func TestWillWriteAsksGoplsOnceForAllItsFiles(t *testing.T) {
	f := newFixture(t, "go", DefaultConfig())
	broken := map[string]string{
		"main.go":        f.read(t, "main.go") + "\nvar _ int = \"main\"\n",
		"greet/greet.go": f.read(t, "greet/greet.go") + "\nvar _ int = \"greet\"\n",
	}
	for rel, text := range broken {
		if err := os.WriteFile(filepath.Join(f.dir, rel), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pulls := func() uint64 {
		var m dto.Metric
		if err := f.p.metrics.LSPRequestDuration.WithLabelValues("gopls", "workspace/executeCommand").(prometheus.Histogram).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetHistogram().GetSampleCount()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rels := []string{"main.go", "greet/greet.go"}
	before := pulls()
	if err := f.p.WillWrite(ctx, f.run, rels); err != nil {
		t.Fatal(err)
	}
	if n := pulls() - before; n != 1 {
		t.Errorf("files/willWrite about %d Go files asked gopls %d times, want once", len(rels), n)
	}
	for rel, text := range broken {
		if err := os.WriteFile(filepath.Join(f.dir, rel), []byte(text+"// a comment\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := f.p.DidWrite(ctx, f.run, rels)
	if err != nil {
		t.Fatal(err)
	}
	if rep.State != orchestrator.WriteClean {
		t.Errorf("a write that left the files' problems as they were: want clean, got %s:\n%s", rep.State, rep.Text)
	}
}
