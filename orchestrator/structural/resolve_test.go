package structural

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-dev/berth/orchestrator"
)

// recorder is a write observer that records what was on disk when it was
// told of a write, and answers with a fixed report. The real one (the lsp
// provider, with gopls) is driven through the binary in e2e.
type recorder struct {
	dir       string
	will, did []string // the files' contents when each was called
	paths     []string
	report    *orchestrator.WriteReport
}

func (r *recorder) WriteObserver() orchestrator.WriteObserver { return r }

func (r *recorder) WillWrite(_ context.Context, _ *orchestrator.Run, paths []string) error {
	r.paths = paths
	for _, p := range paths {
		b, _ := os.ReadFile(filepath.Join(r.dir, p))
		r.will = append(r.will, string(b))
	}
	return nil
}

func (r *recorder) DidWrite(_ context.Context, _ *orchestrator.Run, paths []string) (*orchestrator.WriteReport, error) {
	for _, p := range paths {
		b, _ := os.ReadFile(filepath.Join(r.dir, p))
		r.did = append(r.did, string(b))
	}
	return r.report, nil
}

// TestResolveReportsTheWritesProblems: resolve accept tells
// the write observer of the files before and after it writes them, as a
// harness's files/willWrite and files/didWrite do, and shows its report;
// with no observer it says the write was not checked.
//
// Issue 11 item 12c.
func TestResolveReportsTheWritesProblems(t *testing.T) {
	f := newFixture(t, DefaultConfig(), map[string]string{"a.go": goCall, "sub/b.go": goCall})
	rec := &recorder{dir: f.dir, report: &orchestrator.WriteReport{State: orchestrator.WriteIssues, Text: "This write introduced 1 new problem(s):\n  a.go:4:2 error: undefined: finish"}}
	f.p.Observers = rec
	f.ok("ast_edit", map[string]any{"pattern": "done($X)", "rewrite": "finish($X)", "language": "go"})
	text := f.ok("resolve", map[string]any{"edit_id": "edit_1", "action": "accept"})
	if want := "accepted edit_1: wrote 2 replacements in 2 files: a.go, sub/b.go\nThis write introduced 1 new problem(s):\n  a.go:4:2 error: undefined: finish"; text != want {
		t.Errorf("resolve said:\n%s\nwant:\n%s", text, want)
	}
	if strings.Join(rec.paths, " ") != "a.go sub/b.go" || len(rec.will) != 2 || rec.will[0] != goCall || len(rec.did) != 2 || !strings.Contains(rec.did[1], "finish(1)") {
		t.Errorf("observer told of %v; before the write it saw %q, after %q", rec.paths, rec.will, rec.did)
	}

	f.p.Observers = nil
	f.ok("ast_edit", map[string]any{"pattern": "finish($X)", "rewrite": "done($X)", "path": "a.go"})
	text = f.ok("resolve", map[string]any{"edit_id": "edit_2", "action": "accept"})
	if !strings.HasSuffix(text, "\nDiagnostics unknown: no language-server side is connected, so the write was not checked.") {
		t.Errorf("without an observer resolve said:\n%s", text)
	}
}
