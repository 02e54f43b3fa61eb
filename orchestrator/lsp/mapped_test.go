package lsp

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-dev/berth/enclosure/host/hosttest"
)

// gopls in an enclosure that sees the workdir at another path, as a
// container sees it at its mount: it is started there and told only that
// path (root, documents, the checker's directory), and what it answers
// (references, a rename's edits, a definition outside the workdir) comes
// back as workdir-relative paths, applied to the host's files (issue 13
// item 4).
func TestGoplsThroughAMappedWorkdir(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	copyTree(t, filepath.Join("testdata", "go"), dir)
	m := hosttest.NewMapped(t, dir)
	f := newFixtureOn(t, dir, "run-mapped", DefaultConfig(), m)
	q := func(action, file string, line int, symbol string) map[string]any {
		return map[string]any{"action": action, "file": file, "line": line, "symbol": symbol}
	}
	var shown []string
	show := func(text string) string { shown = append(shown, text); return text }

	contains(t, show(f.ok(t, q("references", "greet/greet.go", 21, "Hello"))), "references of \"Hello\" at greet/greet.go:21: 4",
		"greet/greet.go:21:6: func Hello(name string) string {", "main.go:13:20:", "main.go:13:42:")
	contains(t, show(f.ok(t, map[string]any{"action": "diagnostics", "file": "*"})), "go vet ./... (exit 0): 0 problem(s)")

	text, isErr := f.call(t, "lsp_rename", map[string]any{"file": "greet/greet.go", "line": 21, "symbol": "func Hello", "new_name": "Salute"})
	if isErr {
		t.Fatal(text)
	}
	contains(t, show(text), "greet/greet.go: 2 edit(s)", "main.go: 3 edit(s)")
	contains(t, f.read(t, "main.go"), `greet.Salute("wörld")`)
	contains(t, f.read(t, "greet/greet.go"), "func Salute(name string) string {")
	contains(t, show(f.ok(t, q("definition", "main.go", 12, "greet.Salute("))), "greet/greet.go:21:6: func Salute(name string) string {")

	// The standard library is not in the mapped view: an edit there is
	// outside the working directory, whatever its path looks like.
	text, _ = f.call(t, "lsp_rename", map[string]any{"file": "main.go", "line": 11, "symbol": "Println", "new_name": "Say"})
	contains(t, show(text), "outside the working directory", "nothing was written")

	for _, s := range shown {
		if strings.Contains(s, m.View) || strings.Contains(s, dir) {
			t.Errorf("an answer names an absolute workdir path instead of a relative one:\n%s", s)
		}
	}
	sent := m.Stdin()
	if !strings.Contains(sent, `"rootUri":"file://`+m.View+`"`) || !strings.Contains(sent, "file://"+m.View+"/greet/greet.go") {
		t.Errorf("gopls was not given the mapped paths (%s):\n%.2000s", m.View, sent)
	}
	if strings.Contains(sent, dir) {
		t.Errorf("gopls was given a host path (%s)", dir)
	}
	cmds := m.Cmds()
	if len(cmds) < 2 {
		t.Fatalf("started %d processes, want gopls and go vet", len(cmds))
	}
	for _, c := range cmds {
		if c.Dir != m.View {
			t.Errorf("%s started in %q, want the mapped workdir %q", c.Path, c.Dir, m.View)
		}
	}
}
