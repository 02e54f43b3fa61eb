package lsp

import (
	"os"
	"path/filepath"
	"testing"

	"go.lsp.dev/protocol"

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
	s := &server{workdir: dir, ws: testRoot(t, dir), enc: utf16Enc, docs: map[string]*document{}, files: map[string]cachedFile{}}
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
