package lsp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.lsp.dev/protocol"
)

// A list longer than its cap says "showing N of M", sorted, without
// duplicates, each location with its source line.
func TestListLocationsCap(t *testing.T) {
	dir := t.TempDir()
	abs := filepath.Join(dir, "a.go")
	var src []string
	for i := range 60 {
		src = append(src, "use(x) // line "+strings.Repeat("é", i%3))
	}
	if err := os.WriteFile(abs, []byte(strings.Join(src, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &server{workdir: dir, enc: utf16Enc, docs: map[string]*document{}, files: map[string]cachedFile{}}
	r := s.lineReader()
	var spots []spot
	for i := 59; i >= 0; i-- { // out of order, with a duplicate
		spots = append(spots, spot{abs: abs, pos: protocol.Position{Line: uint32(i), Character: 4}})
	}
	spots = append(spots, spots[0])
	text := r.listLocations(spots, 50, "references of \"x\"")
	lines := strings.Split(text, "\n")
	if lines[0] != `references of "x": showing 50 of 60` || len(lines) != 51 {
		t.Fatalf("head %q, %d lines", lines[0], len(lines))
	}
	if lines[1] != "a.go:1:5: use(x) // line" || lines[2] != "a.go:2:5: use(x) // line é" {
		t.Errorf("locations:\n%s", strings.Join(lines[1:3], "\n"))
	}
	if got := countLine("symbols", 3, 200); got != "symbols: 3" {
		t.Errorf("under the cap: %q", got)
	}
}
