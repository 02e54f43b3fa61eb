package lsp

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.lsp.dev/protocol"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

// A problem the server reports in a file it was never sent (a caller
// broken by a write elsewhere) gets its column from the file on disk,
// counted in characters from the server's units.
func TestNewOnesInAnUnopenedFile(t *testing.T) {
	dir := t.TempDir()
	abs := filepath.Join(dir, "b.go")
	if err := os.WriteFile(abs, []byte("package b\n\ns := \"🌍\" + y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &server{paths: pathMap{workdir: dir}, enc: utf16Enc}
	s.paths.bind(testRoot(t, dir))
	p := &Provider{metrics: metrics.NewForTest()}
	reg := newRegistry()
	items := []protocol.Diagnostic{{
		Range:    protocol.Range{Start: protocol.Position{Line: 2, Character: 12}, End: protocol.Position{Line: 2, Character: 13}},
		Severity: protocol.DiagnosticSeverityError, Message: protocol.String("undefined: y"),
	}}
	got := p.newOnes(reg, s, abs, items, nil)
	if len(got) != 1 || got[0].rel != "b.go" || got[0].line != 3 || got[0].col != 12 {
		t.Fatalf("want b.go:3:12, got %+v", got)
	}
	if again := p.newOnes(reg, s, abs, items, nil); len(again) != 0 {
		t.Errorf("reported twice: %+v", again)
	}
}

// TestDidWriteReportsUncheckedFilesInShort: what files/didWrite says of files it
// could not check is whole and short. A file no server can serve gets its
// whole reason on one line; a file that does not exist is never clean; a
// file no server is meant for (a .csv) gets one line, not the catalog's
// extensions; a file deleted after files/willWrite is checked as a
// deletion.
//
// Issue 11 item 13.
func TestDidWriteReportsUncheckedFilesInShort(t *testing.T) {
	dir := t.TempDir()
	dir, _ = filepath.EvalSymlinks(dir)
	copyTree(t, filepath.Join("testdata", "go"), dir)
	for rel, text := range map[string]string{
		"data.csv":         "a,b\n1,2\n",
		"script.py":        "print('no pyproject above me')\n",
		"greet/extra.go":   "package greet\n\nfunc unused() {}\n",
		"notes/README.txt": "notes\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, rel), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f := newFixtureIn(t, dir, "run-item13", DefaultConfig())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	didWrite := func(paths ...string) *orchestrator.WriteReport {
		t.Helper()
		rep, err := f.p.DidWrite(ctx, f.run, paths)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("didWrite %v: %s\n%s", paths, rep.State, rep.Text)
		return rep
	}
	noCutLine := func(text string) {
		t.Helper()
		for _, l := range strings.Split(text, "\n") {
			if strings.HasSuffix(l, ":") && !strings.HasPrefix(l, "Not checked") && !strings.HasPrefix(l, "This write") {
				t.Errorf("a line is cut after its colon: %q", l)
			}
		}
	}

	// A file no server is meant for: one line, state unknown.
	rep := didWrite("data.csv")
	if rep.State != orchestrator.WriteUnknown || rep.Text != "data.csv was not checked: no language server is meant for .csv files." {
		t.Errorf("a .csv: want unknown and one line, got %s: %q", rep.State, rep.Text)
	}
	rep = didWrite("data.csv", "notes/README.txt")
	if strings.Count(rep.Text, "\n") != 0 || !strings.Contains(rep.Text, "no language server is meant for .csv or .txt files") {
		t.Errorf("two files no server is meant for: want one line, got %q", rep.Text)
	}

	// A file whose servers cannot start here: the whole reason, one line.
	rep = didWrite("script.py")
	if rep.State != orchestrator.WriteUnknown {
		t.Errorf("script.py: want unknown, got %s", rep.State)
	}
	contains(t, rep.Text, "script.py: no language server can serve script.py: pyright: no root marker", "pylsp: no root marker")
	noCutLine(rep.Text)

	// A file that does not exist was never checked: not clean.
	rep = didWrite("nope.go")
	if rep.State == orchestrator.WriteClean {
		t.Errorf("a missing file: reported clean:\n%s", rep.Text)
	}
	contains(t, rep.Text, "nope.go: the file does not exist")

	// A file that existed at files/willWrite and is gone is a deletion,
	// checked as such; a .csv beside a checked file leaves the state to it.
	if err := f.p.WillWrite(ctx, f.run, []string{"greet/extra.go"}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "greet/extra.go")); err != nil {
		t.Fatal(err)
	}
	rep = didWrite("greet/extra.go", "data.csv")
	if rep.State != orchestrator.WriteClean {
		t.Errorf("a deletion that breaks nothing, and a .csv: want clean, got %s:\n%s", rep.State, rep.Text)
	}
	contains(t, rep.Text, "No new problems", "data.csv was not checked: no language server is meant for .csv files.")
}
