package lsp

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
	"unsafe"

	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"

	"github.com/berth-dev/berth/enclosure/host"
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
	s := &server{paths: pathMap{workdir: dir}, enc: utf16Enc}
	s.paths.bind(testRoot(t, dir))
	r := newLines(s)
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

// A long list's files are checked on disk while the server works
// (recheck): a file changed since the last list is read again, and one
// checked after the query began is not looked at again, so its line is
// the one it had when the query ran.
func TestRecheckKeepsLongListsFresh(t *testing.T) {
	dir := t.TempDir()
	abs := filepath.Join(dir, "a.go")
	write := func(text string) {
		if err := os.WriteFile(abs, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := &server{paths: pathMap{workdir: dir}, enc: utf16Enc}
	s.paths.bind(testRoot(t, dir))
	spots := []spot{{abs: abs, pos: protocol.Position{Line: 1}}}
	list := func(change func()) string {
		r := newLines(s)
		r.since = time.Now()
		s.cache.recheck(r.since)
		if change != nil {
			change()
		}
		defer r.remember()
		return r.listLocations(slices.Clone(spots), 50, "x")
	}
	write("one\ntwo\n")
	if got := list(nil); !strings.Contains(got, "a.go:2:1: two") {
		t.Fatalf("first list: %q", got)
	}
	write("one\ntwo, changed\n")
	if got := list(nil); !strings.Contains(got, "a.go:2:1: two, changed") {
		t.Fatalf("after a change: %q", got)
	}
	if got := list(func() { write("one\nthree, written after the check\n") }); !strings.Contains(got, "a.go:2:1: two, changed") {
		t.Fatalf("a file checked during the query was looked at again: %q", got)
	}
	if got := list(nil); !strings.Contains(got, "three, written after the check") {
		t.Fatalf("the next query missed the change: %q", got)
	}
}

// A long source line is cut at maxSourceLine characters, not bytes.
func TestLocationCutsLongLines(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{strings.Repeat("a", maxSourceLine), strings.Repeat("a", maxSourceLine)},
		{strings.Repeat("é", maxSourceLine), strings.Repeat("é", maxSourceLine)},
		{strings.Repeat("é", maxSourceLine+1), strings.Repeat("é", maxSourceLine) + "…"},
		{"  \t" + strings.Repeat("ab", maxSourceLine) + "  ", strings.Repeat("ab", maxSourceLine/2) + "…"},
	} {
		got := location{path: "a.go", line: 1, col: 1, text: tc.text}.String()
		if want := "a.go:1:1: " + tc.want; got != want {
			t.Errorf("%d characters: got %d characters, want %d", utf8.RuneCountInString(tc.text), utf8.RuneCountInString(got), utf8.RuneCountInString(want))
		}
	}
}

// The server's memo of URIs to paths stays within maxPaths, and equal
// URIs get one string.
func TestPathMemoIsBounded(t *testing.T) {
	dir := t.TempDir()
	s := &server{paths: pathMap{workdir: dir, encl: host.New()}}
	for i := range maxPaths + 10 {
		s.paths.pathOf(uri.File(filepath.Join(dir, fmt.Sprintf("f%d.go", i))))
		if len(s.paths.memo) > maxPaths {
			t.Fatalf("%d paths remembered, more than %d", len(s.paths.memo), maxPaths)
		}
	}
	u := uri.File(filepath.Join(dir, "a.go"))
	a, _ := s.paths.pathOf(u)
	b, _ := s.paths.pathOf(u)
	if a != filepath.Join(dir, "a.go") || unsafe.StringData(a) != unsafe.StringData(b) {
		t.Errorf("pathOf: %q and %q, not one string", a, b)
	}
}
