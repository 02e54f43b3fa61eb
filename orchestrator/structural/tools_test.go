package structural

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// fixture is a run with the structural tools behind a real registry, so
// dispatch validates arguments and enforces surfaces as in production.
type fixture struct {
	t   *testing.T
	p   *Provider
	reg *orchestrator.Registry
	run *orchestrator.Run
	dir string
}

func newFixture(t *testing.T, cfg Config, files map[string]string) *fixture {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	reg := orchestrator.NewRegistry(metrics.NewForTest(), 0)
	reg.Add(p)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		writeFile(t, filepath.Join(dir, name), content)
	}
	run := orchestrator.NewRun("r1", "c1", dir, host.New(), nil, nil)
	t.Cleanup(func() { run.End("test over") })
	return &fixture{t: t, p: p, reg: reg, run: run, dir: dir}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) read(name string) string {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, name))
	if err != nil {
		f.t.Fatal(err)
	}
	return string(b)
}

// call calls a tool on a surface and returns its result.
func (f *fixture) callOn(s orchestrator.Surface, name string, args map[string]any) *orchestrator.Result {
	f.t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		f.t.Fatal(err)
	}
	res, err := f.reg.Call(context.Background(), f.run, s, name, raw)
	if err != nil {
		f.t.Fatalf("%s: %v", name, err)
	}
	return res
}

func (f *fixture) call(name string, args map[string]any) *orchestrator.Result {
	f.t.Helper()
	return f.callOn(orchestrator.SurfaceFull, name, args)
}

// ok calls a tool that must succeed and returns its text.
func (f *fixture) ok(name string, args map[string]any) string {
	f.t.Helper()
	res := f.call(name, args)
	if res.IsError {
		f.t.Fatalf("%s %v failed: %s", name, args, res.FirstText())
	}
	return res.FirstText()
}

// fails calls a tool that must fail with a message matching re.
func (f *fixture) fails(name string, args map[string]any, re string) string {
	f.t.Helper()
	res := f.call(name, args)
	if !res.IsError {
		f.t.Fatalf("%s %v: want an error, got %s", name, args, res.FirstText())
	}
	if !regexp.MustCompile(re).MatchString(res.FirstText()) {
		f.t.Fatalf("%s %v: error %q does not match %q", name, args, res.FirstText(), re)
	}
	return res.FirstText()
}

// locLine is a match's location line in ast_grep's text.
var locLine = regexp.MustCompile(`(?m)^(\S+:\d+:\d+)$`)

// locations are the matches an ast_grep result lists, in order; the
// result is text alone (issue 11 item 12d: no table repeating it).
func locations(res *orchestrator.Result) []string {
	if len(res.Content) != 1 || res.Content[0].Type != "text" {
		panic("ast_grep answered with more than one text block")
	}
	var locs []string
	for _, m := range locLine.FindAllStringSubmatch(res.FirstText(), -1) {
		locs = append(locs, m[1])
	}
	return locs
}

func truncated(res *orchestrator.Result) bool {
	return strings.Contains(res.FirstText(), "; showing ")
}

const goCall = "package a\n\nfunc f() {\n\tdone(1)\n}\n"

func TestGrepWalksTheWorkspace(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxFileBytes = 200
	f := newFixture(t, cfg, map[string]string{
		"b.go":             goCall,
		"a.go":             goCall + "\nfunc g() { done(2); done(3) }\n",
		"sub/c.go":         goCall,
		"sub/.gitignore":   "local.go\n",
		"sub/local.go":     goCall,
		".gitignore":       "gen/\n*_gen.go\n!keep_gen.go\n",
		"gen/x.go":         goCall,
		"x_gen.go":         goCall,
		"keep_gen.go":      goCall,
		".hidden/h.go":     goCall,
		"notes.txt":        "done(1)",
		"big.go":           goCall + "// " + strings.Repeat("x", 300) + "\n",
		"bin.go":           "package a\x00done(1)",
		"nodone/other.go":  "package a\nfunc f() { other(1) }\n",
		"sub/deeper/d.go":  goCall,
		"sub/deeper/e.txt": "done(1)",
	})
	res := f.call("ast_grep", map[string]any{"pattern": "done($X)", "language": "go"})
	if res.IsError {
		t.Fatal(res.FirstText())
	}
	want := []string{"a.go:4:2", "a.go:7:12", "a.go:7:21", "b.go:4:2", "keep_gen.go:4:2", "sub/c.go:4:2", "sub/deeper/d.go:4:2"}
	if got := locations(res); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("matches at %v, want %v", got, want)
	}
	head := res.FirstText()
	for _, s := range []string{"7 match(es) in 5 file(s)", "skipped 2 file(s)", "big.go (", "over the 200 B limit", "bin.go (binary)"} {
		if !strings.Contains(head, s) {
			t.Errorf("result does not say %q:\n%s", s, head)
		}
	}
	if truncated(res) {
		t.Error("a complete result is marked truncated")
	}

	res = f.call("ast_grep", map[string]any{"pattern": "done($X)", "language": "go", "max_results": 2})
	if got := locations(res); len(got) != 2 || !truncated(res) || !strings.Contains(res.FirstText(), "showing 2 of 7") {
		t.Errorf("max_results 2: %v, truncated %v, %q", got, truncated(res), res.FirstText())
	}

	// A file named explicitly is searched with its language inferred.
	res = f.call("ast_grep", map[string]any{"pattern": "done($X)", "path": "sub/c.go"})
	if got := locations(res); strings.Join(got, " ") != "sub/c.go:4:2" {
		t.Errorf("path sub/c.go: %v", got)
	}
	// The bindings come with each match.
	if want := "1 match(es) in 1 file(s) for go pattern (parsed as statement)\n\nsub/c.go:4:2\n  | done(1)\n  $X = 1"; res.FirstText() != want {
		t.Errorf("text %q, want %q", res.FirstText(), want)
	}
}

func TestGrepRefusesBadArguments(t *testing.T) {
	f := newFixture(t, DefaultConfig(), map[string]string{"a.go": goCall, "a.unknown": "x"})
	f.fails("ast_grep", map[string]any{"pattern": "done($X)"}, `language is required when path is a folder: pass one of .*\bgo\b.*\bpython\b`)
	f.fails("ast_grep", map[string]any{"pattern": "done($X)", "language": "cobol"}, `unknown language "cobol": use one of .*\bdart\b.*\bgo\b`)
	f.fails("ast_grep", map[string]any{"pattern": "x", "path": "a.unknown"}, `cannot tell the language of .*a.unknown.*: pass language`)
	f.fails("ast_grep", map[string]any{"pattern": "done($X)", "path": "../elsewhere", "language": "go"}, `outside the working directory`)
	f.fails("ast_grep", map[string]any{"pattern": "done($X)", "path": "missing.go"}, `does not exist in the workspace`)
	f.fails("ast_grep", map[string]any{"pattern": "done((", "path": "a.go"}, `(?s)unparseable as go code in any context.*statement: .*expression: `)
	f.fails("ast_grep", map[string]any{"pattern": "", "path": "a.go"}, `pattern is empty`)
	f.fails("ast_grep", map[string]any{"pattern": "x", "path": "a.go", "bogus": 1}, `invalid arguments for ast_grep`)
	f.fails("ast_edit", map[string]any{"pattern": "done($X)", "rewrite": "undone($Y)", "path": "a.go"}, `bad rewrite: it uses \$Y, which the pattern does not bind; the pattern binds \$X: use those`)
	f.fails("ast_edit", map[string]any{"pattern": "done($$$A)", "rewrite": "undone($$$)", "path": "a.go"}, `bad rewrite: it has \$\$\$ without a name: name the run in the pattern`)
}

func TestTreesAreCachedForTheRun(t *testing.T) {
	f := newFixture(t, DefaultConfig(), map[string]string{"a.go": goCall, "b.go": "package a\nfunc g() { other() }\n"})
	f.ok("ast_grep", map[string]any{"pattern": "done($X)", "language": "go"})
	st := stateOf(f.run, f.p.cfg.CacheBytes)
	a := filepath.Join(f.dir, "a.go")
	first := st.cache.entries[a].tree
	if first == nil {
		t.Fatal("a.go was not cached")
	}
	if e := st.cache.entries[filepath.Join(f.dir, "b.go")]; e == nil || e.tree != nil || !e.lacks["done (word)"] {
		t.Fatalf("b.go, which lacks the word done, should be known to lack it without a tree: %+v", e)
	}
	f.ok("ast_grep", map[string]any{"pattern": "done($Y)", "language": "go"})
	if st.cache.entries[a].tree != first {
		t.Error("the second query parsed a.go again")
	}
	writeFile(t, a, goCall+"// changed\n")
	f.ok("ast_grep", map[string]any{"pattern": "done($Y)", "language": "go"})
	if st.cache.entries[a].tree == first {
		t.Error("a changed file was not parsed again")
	}
}

func TestEditStagesAndResolveWrites(t *testing.T) {
	f := newFixture(t, DefaultConfig(), map[string]string{
		"a.go": goCall,
		"b.go": "package a\n\nfunc g() {\n\tif ok {\n\t\tdone(x +\n\t\t\ty)\n\t}\n}\n",
	})
	out := f.ok("ast_edit", map[string]any{"pattern": "done($X)", "rewrite": "finish($X, nil)", "language": "go"})
	for _, s := range []string{`(proposed) 2 replacements in 2 files`, `call resolve with edit_id "edit_1"`, "--- a/a.go", "+++ b/a.go", "-\tdone(1)", "+\tfinish(1, nil)", "@@ -1,5 +1,5 @@", "@@ -2,7 +2,7 @@"} {
		if !strings.Contains(out, s) {
			t.Errorf("proposal lacks %q:\n%s", s, out)
		}
	}
	if f.read("a.go") != goCall {
		t.Fatal("ast_edit wrote a file")
	}
	st := stateOf(f.run, f.p.cfg.CacheBytes)
	if st.cache.entries[filepath.Join(f.dir, "a.go")] == nil {
		t.Fatal("ast_edit's search did not cache a.go")
	}
	out = f.ok("resolve", map[string]any{"edit_id": "edit_1", "action": "accept"})
	for _, n := range []string{"a.go", "b.go"} {
		if st.cache.entries[filepath.Join(f.dir, n)] != nil {
			t.Errorf("accept left %s's tree in the cache", n)
		}
	}
	if !strings.Contains(out, "accepted edit_1: wrote 2 replacements in 2 files: a.go, b.go") {
		t.Errorf("accept said %q", out)
	}
	if got := f.read("a.go"); got != strings.Replace(goCall, "done(1)", "finish(1, nil)", 1) {
		t.Errorf("a.go is %q", got)
	}
	if got := f.read("b.go"); !strings.Contains(got, "\t\tfinish(x +\n\t\t\ty, nil)\n") {
		t.Errorf("b.go is %q", got)
	}
	f.fails("resolve", map[string]any{"edit_id": "edit_1", "action": "accept"}, `edit_id "edit_1" was already resolved \(accepted\)`)
	f.fails("resolve", map[string]any{"edit_id": "edit_9", "action": "accept"}, `unknown edit_id "edit_9": this run has no staged change`)
	f.fails("resolve", map[string]any{"edit_id": "edit_1", "action": "maybe"}, `invalid arguments for resolve`)

	// The written files were dropped from the cache: a search sees them.
	if locs := locations(f.call("ast_grep", map[string]any{"pattern": "finish($X, nil)", "language": "go"})); len(locs) != 2 {
		t.Errorf("after accept, finish(...) found at %v", locs)
	}

	f.ok("ast_edit", map[string]any{"pattern": "finish($X, nil)", "rewrite": "done($X)", "language": "go"})
	out = f.ok("resolve", map[string]any{"edit_id": "edit_2", "action": "discard"})
	if !strings.Contains(out, "discarded edit_2") || !strings.Contains(f.read("a.go"), "finish(1, nil)") {
		t.Errorf("discard: %q, a.go %q", out, f.read("a.go"))
	}
	f.fails("resolve", map[string]any{"edit_id": "edit_2", "action": "accept"}, `already resolved \(discarded\)`)
}

func TestResolveRejectsAChangeWhenAFileChanged(t *testing.T) {
	f := newFixture(t, DefaultConfig(), map[string]string{"a.go": goCall, "b.go": goCall})
	f.ok("ast_edit", map[string]any{"pattern": "done($X)", "rewrite": "finish($X)", "language": "go"})
	writeFile(t, filepath.Join(f.dir, "b.go"), goCall+"// edited meanwhile\n")
	f.fails("resolve", map[string]any{"edit_id": "edit_1", "action": "accept"}, `edit_1 was rejected and nothing was written: 1 file\(s\) changed since the change was staged: b.go\. Call ast_edit again`)
	if f.read("a.go") != goCall || f.read("b.go") != goCall+"// edited meanwhile\n" {
		t.Error("a rejected change wrote something")
	}
	f.fails("resolve", map[string]any{"edit_id": "edit_1", "action": "accept"}, `already resolved \(rejected`)
}

func TestResolveWritesAllOrNothing(t *testing.T) {
	f := newFixture(t, DefaultConfig(), map[string]string{"a.go": goCall, "b.go": goCall, "c.go": goCall})
	renames := 0
	f.p.Writer = &workspace.Writer{Rename: func(from, to string) error {
		renames++
		if renames == 2 {
			return errors.New("disk full")
		}
		return os.Rename(from, to)
	}}
	f.ok("ast_edit", map[string]any{"pattern": "done($X)", "rewrite": "finish($X)", "language": "go"})
	f.fails("resolve", map[string]any{"edit_id": "edit_1", "action": "accept"}, `edit_1 was not applied: nothing was written: replacing b.go failed: disk full\. It is still staged`)
	for _, n := range []string{"a.go", "b.go", "c.go"} {
		if f.read(n) != goCall {
			t.Errorf("%s changed although the change failed part-way", n)
		}
	}
	entries, _ := os.ReadDir(f.dir)
	if len(entries) != 3 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	f.p.Writer = &workspace.Writer{}
	f.ok("resolve", map[string]any{"edit_id": "edit_1", "action": "accept"})
	for _, n := range []string{"a.go", "b.go", "c.go"} {
		if !strings.Contains(f.read(n), "finish(1)") {
			t.Errorf("%s was not written on the second accept", n)
		}
	}
}

func TestEditPreservesCRLFAndBOM(t *testing.T) {
	src := "\xEF\xBB\xBFpackage a\r\n\r\nfunc f() {\r\n\tif ok {\r\n\t\tdone(a,\r\n\t\t\tb)\r\n\t}\r\n}\r\n"
	f := newFixture(t, DefaultConfig(), map[string]string{"a.go": src})
	f.ok("ast_edit", map[string]any{"pattern": "if ok { $$$B }", "rewrite": "if !ok {\n\treturn\n}\n$$$B", "path": "a.go"})
	f.ok("resolve", map[string]any{"edit_id": "edit_1", "action": "accept"})
	want := "\xEF\xBB\xBFpackage a\r\n\r\nfunc f() {\r\n\tif !ok {\r\n\t\treturn\r\n\t}\r\n\tdone(a,\r\n\t\tb)\r\n}\r\n"
	if got := f.read("a.go"); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestEditFlagsARewriteThatBreaksTheSyntax(t *testing.T) {
	f := newFixture(t, DefaultConfig(), map[string]string{"a.go": goCall, "b.go": goCall})
	out := f.ok("ast_edit", map[string]any{"pattern": "done($X)", "rewrite": "done($X", "language": "go"})
	for _, s := range []string{"WARNING: the rewrite breaks the syntax of 2 file(s)", "a.go: the rewritten file has", "new syntax error(s), the first at"} {
		if !strings.Contains(out, s) {
			t.Errorf("proposal lacks %q:\n%s", s, out)
		}
	}
}

func TestEditKeepsTheOuterOfOverlappingMatches(t *testing.T) {
	f := newFixture(t, DefaultConfig(), map[string]string{"a.go": "package a\n\nvar x = f(f(f(1)))\n"})
	out := f.ok("ast_edit", map[string]any{"pattern": "f($X)", "rewrite": "g($X)", "path": "a.go"})
	if !strings.Contains(out, "(proposed) 1 replacement in 1 file; 2 overlapping match(es) inside others were dropped (the outer one wins)") {
		t.Errorf("proposal: %s", out)
	}
	f.ok("resolve", map[string]any{"edit_id": "edit_1", "action": "accept"})
	if got := f.read("a.go"); got != "package a\n\nvar x = g(f(f(1)))\n" {
		t.Errorf("a.go is %q", got)
	}
}

func TestDiffPreviewIsCapped(t *testing.T) {
	var b strings.Builder
	b.WriteString("package a\n\nfunc f() {\n")
	for i := 0; i < 100; i++ {
		b.WriteString("\tdone(1)\n\tskip()\n\tskip()\n\tskip()\n\tskip()\n\tskip()\n\tskip()\n\tskip()\n")
	}
	b.WriteString("}\n")
	cfg := DefaultConfig()
	cfg.DiffLines = 40
	f := newFixture(t, cfg, map[string]string{"a.go": b.String()})
	out := f.ok("ast_edit", map[string]any{"pattern": "done($X)", "rewrite": "finish($X)", "path": "a.go"})
	if !regexp.MustCompile(`… diff cut at 40 lines \(\d+ more\)$`).MatchString(out) {
		t.Errorf("the preview is not capped: ...%s", out[max(0, len(out)-200):])
	}
	if !strings.HasPrefix(out, "(proposed) 100 replacements in 1 file") {
		t.Errorf("proposal: %.80s", out)
	}
}

func TestWriteToolsAreReadOnlySurfacesAbsent(t *testing.T) {
	f := newFixture(t, DefaultConfig(), map[string]string{"a.go": goCall})
	for _, s := range []orchestrator.Surface{orchestrator.SurfacePlan, orchestrator.SurfaceReadonly} {
		var names []string
		for _, sp := range f.reg.List(f.run, s) {
			names = append(names, sp.Name)
		}
		if strings.Join(names, ",") != "ast_grep" {
			t.Errorf("%s surface lists %v, want only ast_grep", s, names)
		}
		res := f.callOn(s, "ast_edit", map[string]any{"pattern": "done($X)", "rewrite": "x", "path": "a.go"})
		if !res.IsError || !strings.Contains(res.FirstText(), "not allowed on the "+string(s)+" surface") {
			t.Errorf("ast_edit on %s: %v", s, res.FirstText())
		}
		res = f.callOn(s, "resolve", map[string]any{"edit_id": "edit_1", "action": "accept"})
		if !res.IsError || !strings.Contains(res.FirstText(), "not allowed") {
			t.Errorf("resolve on %s: %v", s, res.FirstText())
		}
	}
}

func TestStagedEditsBelongToTheirRun(t *testing.T) {
	f := newFixture(t, DefaultConfig(), map[string]string{"a.go": goCall})
	f.ok("ast_edit", map[string]any{"pattern": "done($X)", "rewrite": "finish($X)", "path": "a.go"})
	other := orchestrator.NewRun("r2", "c1", f.dir, host.New(), nil, nil)
	defer other.End("test over")
	res, err := f.reg.Call(context.Background(), other, orchestrator.SurfaceFull, "resolve", json.RawMessage(`{"edit_id":"edit_1","action":"accept"}`))
	if err != nil || !res.IsError || !strings.Contains(res.FirstText(), `unknown edit_id "edit_1"`) {
		t.Errorf("another run resolved edit_1: %v %v", err, res)
	}
	st := stateOf(f.run, f.p.cfg.CacheBytes)
	f.run.End("stopped")
	if f.read("a.go") != goCall {
		t.Error("ending the run wrote the staged change")
	}
	if len(st.edits) != 0 || len(st.cache.entries) != 0 {
		t.Errorf("after the run's end it still holds %d staged edit(s) and %d cached file(s)", len(st.edits), len(st.cache.entries))
	}
}

// A header searched as C and then as C++ is parsed by each grammar: the
// cache keeps a tree per language, never the other's.
func TestCacheKeysTheLanguage(t *testing.T) {
	f := newFixture(t, DefaultConfig(), map[string]string{"x.h": "int f(void) { g(1); return 0; }\n"})
	for _, lang := range []string{"c", "cpp", "c"} {
		res := f.call("ast_grep", map[string]any{"pattern": "g($X)", "path": "x.h", "language": lang})
		if got := locations(res); strings.Join(got, " ") != "x.h:1:15" {
			t.Errorf("as %s: %v %s", lang, got, res.FirstText())
		}
	}
}

// The text a model reads carries each match itself: path:line:col, the
// first lines of its source, and what each variable captured; nothing
// beside it repeats them (issue 11 item 12d).
func TestGrepTextListsEachMatch(t *testing.T) {
	long := "package a\n\nfunc g() {\n\tdone(\"" + strings.Repeat("y", 300) + "\")\n}\n"
	f := newFixture(t, DefaultConfig(), map[string]string{
		"a.go": "package a\n\nfunc f() {\n\tdone(x +\n\t\ty +\n\t\tz +\n\t\tw)\n\tdone(2)\n}\n",
		"b.go": long,
	})
	res := f.call("ast_grep", map[string]any{"pattern": "done($X)", "language": "go"})
	text := res.FirstText()
	want := "3 match(es) in 2 file(s) for go pattern (parsed as statement)\n\n" +
		"a.go:4:2\n  | done(x +\n  | \t\ty +\n  | \t\tz +\n  | … (1 more line)\n  $X = x +⏎\t\ty +⏎\t\tz +⏎\t\tw\n" +
		"a.go:8:2\n  | done(2)\n  $X = 2\n" +
		"b.go:4:2\n  | done(\"" + strings.Repeat("y", 194) + "…\n  $X = \"" + strings.Repeat("y", 79) + "…"
	if text != want {
		t.Errorf("text:\n%s\nwant:\n%s", text, want)
	}
	res = f.call("ast_grep", map[string]any{"pattern": "done($X)", "language": "go", "max_results": 1})
	if text := res.FirstText(); !strings.Contains(text, "showing 1 of 3") || strings.Count(text, ".go:") != 1 || !truncated(res) {
		t.Errorf("max_results 1:\n%s", text)
	}
}

// A change staged before Berth restarted is lost with that Berth: in
// the run resumed after the restart, resolve of its id says so and says
// to stage it again, and never names a change staged since (their ids
// carry a tag of their own).
//
// Issue 29 item 3 (staged ast_edit edits).
func TestEditStagedBeforeARestartIsDeclaredLost(t *testing.T) {
	f := newFixture(t, DefaultConfig(), map[string]string{"a.go": goCall})
	f.ok("ast_edit", map[string]any{"pattern": "done($X)", "rewrite": "finish($X)", "path": "a.go"})
	f.run.End("Berth was killed")
	// The same run, resumed by the Berth that came next.
	resumed := orchestrator.NewRun("r1", "c1", f.dir, host.New(), nil, nil)
	resumed.Resumed = true
	defer resumed.End("test over")
	call := func(name string, args map[string]any) *orchestrator.Result {
		t.Helper()
		raw, _ := json.Marshal(args)
		res, err := f.reg.Call(context.Background(), resumed, orchestrator.SurfaceFull, name, raw)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	lost := "Berth restarted since it was staged, and the changes staged before a restart are lost with it; call ast_edit again to stage the change anew"
	res := call("resolve", map[string]any{"edit_id": "edit_1", "action": "accept"})
	if !res.IsError || !strings.Contains(res.FirstText(), `edit_id "edit_1" is not staged: `+lost) {
		t.Errorf("resolve of an edit staged before the restart: %s", res.FirstText())
	}
	res = call("ast_edit", map[string]any{"pattern": "done($X)", "rewrite": "finish($X)", "path": "a.go"})
	id := regexp.MustCompile(`edit_id "(edit_[0-9a-f]{4}_1)"`).FindStringSubmatch(res.FirstText())
	if res.IsError || id == nil {
		t.Fatalf("ast_edit in the resumed run: %s", res.FirstText())
	}
	res = call("resolve", map[string]any{"edit_id": "edit_1", "action": "accept"})
	if !res.IsError || !strings.Contains(res.FirstText(), lost+"; the changes staged since the restart are "+id[1]) {
		t.Errorf("resolve of an edit staged before the restart, with one staged since: %s", res.FirstText())
	}
	if f.read("a.go") != goCall {
		t.Fatal("a resolve of a lost edit wrote")
	}
	if res = call("resolve", map[string]any{"edit_id": id[1], "action": "accept"}); res.IsError || !strings.Contains(f.read("a.go"), "finish(1)") {
		t.Errorf("resolve of the edit staged since the restart: %s", res.FirstText())
	}
}
