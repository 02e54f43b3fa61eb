package lsp

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"go.lsp.dev/protocol"
	"go.yaml.in/yaml/v3"

	"github.com/berth-dev/berth/enclosure/host"
)

func TestSymbolColumn(t *testing.T) {
	cases := []struct {
		line, symbol string
		col          int    // byte column of the cursor
		err          string // part of the error, when one is expected
	}{
		{"\treturn auth.login(user)", "auth.login", 13, ""},
		{"\treturn auth.login(user)", "login(", 13, ""},
		{"func (s *Server) Start() error {", "func (s *Server) Start", 17, ""},
		{"x := y + z", "+", 7, ""}, // no identifier: the substring's start
		{"fmt.Println(\"héllo 🌍\", greet.Hello(\"wörld\"))", "greet.Hello", 33, ""},
		{"a := f(a)", "a", 0, `"a" occurs 2 times in line 7`},
		{"a := f(a)", "b", 0, `"b" does not occur in line 7`},
		{"a := f(a)", "", 0, "symbol is empty"},
	}
	for _, c := range cases {
		col, err := symbolColumn(c.line, 7, c.symbol)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q in %q: want error %q, got %v", c.symbol, c.line, c.err, err)
			}
		case err != nil:
			t.Errorf("%q in %q: %v", c.symbol, c.line, err)
		case col != c.col:
			t.Errorf("%q in %q: column %d, want %d", c.symbol, c.line, col, c.col)
		}
	}
	_, err := symbolColumn("f(ab, ab)", 3, "ab")
	if err == nil || !strings.Contains(err.Error(), `column 3 (ab): "ab,"`) || !strings.Contains(err.Error(), `column 7 (ab): "ab)"`) {
		t.Errorf("ambiguous: the error should list each occurrence with its column and a hint: %v", err)
	}
}

// TestSymbolPositionPrefersAWholeIdentifier: a symbol matching a whole identifier
// wins over one inside a longer identifier; a symbol found only inside
// longer identifiers is refused, naming them; and every hint an error
// proposes, passed back, lands on the place it names.
//
// Issue 11 item 10.
func TestSymbolPositionPrefersAWholeIdentifier(t *testing.T) {
	resolves := []struct {
		line, symbol string
		col          int
	}{
		// Store is whole only in the type, not in NewMemStore.
		{"\tst := NewMemStore(); var x Store", "Store", 28},
		// A cut first identifier does not matter: the cursor goes to
		// the last, and it is whole.
		{"\treturn greet.Hello(x)", "et.Hello", 14},
	}
	for _, c := range resolves {
		if col, err := symbolColumn(c.line, 1, c.symbol); err != nil || col != c.col {
			t.Errorf("%q in %q: column %d, %v; want %d", c.symbol, c.line, col, err, c.col)
		}
	}

	errs := []struct {
		line, symbol string
		want         []string // parts of the error
		idents       []string // the identifiers the candidates name, in order
	}{
		{"\ts := store.New(s)", "s", []string{`"s" occurs 2 times in line 4`}, []string{"s", "s"}},
		{"\ts := store.New(s)", "s := stor", []string{"only inside a longer identifier (store)"}, []string{"store"}},
		{"\ts := store.New(s)", "stor", []string{"only inside a longer identifier (store)", `column 7 (store): "store"`}, []string{"store"}},
		{"\tm := NewMemStore()", "Store", []string{"only inside a longer identifier (NewMemStore)", `"NewMemStore"`}, []string{"NewMemStore"}},
		{"func (s *Server) Start() error {", "S", []string{"only inside longer identifiers (Server, Start)"}, []string{"Server", "Start"}},
		{"fmt.Println(greet.Hello(\"again\"), greet.Hello(\"twice\"))", "greet.Hello", []string{"occurs 2 times"}, []string{"Hello", "Hello"}},
		{"fmt.Println(\"héllo 🌍\", héllo.Hello(\"wörld\"), héllo)", "héllo", []string{"occurs 3 times"}, []string{"héllo", "héllo", "héllo"}},
		{"foo(foo_bar, foo)", "foo", []string{"occurs 2 times"}, []string{"foo", "foo"}},
		{"a := f(a)", "a", []string{"occurs 2 times"}, []string{"a", "a"}},
		{"a a", "a", []string{"column 1 (a): no substring of this line picks it out alone", `column 3 (a): "a a"`}, []string{"a", "a"}},
		{"x := y + z + w", "+", []string{"column 8 (+): no substring"}, []string{"+", "+"}},
		{"\tv := m[k] + m[k]", "m[k]", []string{"occurs 2 times"}, []string{"k", "k"}}, // the last identifier
	}
	for _, c := range errs {
		_, err := symbolColumn(c.line, 4, c.symbol)
		var se *symbolError
		if !errors.As(err, &se) {
			t.Errorf("%q in %q: want a symbolError, got %v", c.symbol, c.line, err)
			continue
		}
		contains(t, err.Error(), c.want...)
		var idents []string
		for _, cand := range se.candidates {
			idents = append(idents, cand.ident)
			if !cand.ok {
				continue
			}
			// The round trip: the hint, passed back, lands on the
			// candidate's column, which is the start of its identifier.
			col, err := symbolColumn(c.line, 4, cand.hint)
			if err != nil || col != cand.col {
				t.Errorf("%q in %q: hint %q resolves to byte %d (%v), want %d", c.symbol, c.line, cand.hint, col, err, cand.col)
			}
			if !strings.HasPrefix(c.line[cand.col:], cand.ident) || identBefore(c.line, cand.col) {
				t.Errorf("%q in %q: candidate at byte %d is not the start of %q", c.symbol, c.line, cand.col, cand.ident)
			}
			if !strings.Contains(err2str(symbolColumn(c.line, 4, c.symbol)), strconv.Quote(cand.hint)) {
				t.Errorf("%q in %q: hint %q not shown", c.symbol, c.line, cand.hint)
			}
		}
		if strings.Join(idents, ",") != strings.Join(c.idents, ",") {
			t.Errorf("%q in %q: candidates %q, want %q", c.symbol, c.line, idents, c.idents)
		}
	}
}

func err2str(_ int, err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestEncodings(t *testing.T) {
	line := "s := \"héllo 🌍\" + x"
	byteCol := strings.Index(line, "x")
	for _, c := range []struct {
		enc  encoding
		want uint32
	}{{utf8Enc, uint32(byteCol)}, {utf16Enc, 18}, {utf32Enc, 17}} {
		got := c.enc.toServer(line, byteCol)
		if got != c.want {
			t.Errorf("%s: column %d, want %d", c.enc, got, c.want)
		}
		if back := c.enc.fromServer(line, got); back != byteCol {
			t.Errorf("%s: back to byte %d, want %d", c.enc, back, byteCol)
		}
	}
}

func TestLineAt(t *testing.T) {
	text := "one\r\ntwo\nthree\n"
	if l, start, err := lineAt(text, 2); err != nil || l != "two" || start != 5 {
		t.Errorf("line 2: %q %d %v", l, start, err)
	}
	if l, _, err := lineAt(text, 1); err != nil || l != "one" {
		t.Errorf("line 1 keeps no CR: %q %v", l, err)
	}
	if _, _, err := lineAt(text, 4); err == nil || !strings.Contains(err.Error(), "which has 3 lines") {
		t.Errorf("line 4: %v", err)
	}
}

func TestApplyEdits(t *testing.T) {
	pos := func(l, c uint32) protocol.Position { return protocol.Position{Line: l, Character: c} }
	text := "a := \"🌍\"; b := a\nc := a\n"
	out, err := applyEdits(utf16Enc, text, []protocol.TextEdit{
		{Range: protocol.Range{Start: pos(1, 5), End: pos(1, 6)}, NewText: "z"},
		{Range: protocol.Range{Start: pos(0, 0), End: pos(0, 1)}, NewText: "z"},
		{Range: protocol.Range{Start: pos(0, 16), End: pos(0, 17)}, NewText: "z"},
	})
	if err != nil || out != "z := \"🌍\"; b := z\nc := z\n" {
		t.Errorf("got %q %v", out, err)
	}
	_, err = applyEdits(utf16Enc, text, []protocol.TextEdit{
		{Range: protocol.Range{Start: pos(0, 0), End: pos(0, 3)}, NewText: "x"},
		{Range: protocol.Range{Start: pos(0, 2), End: pos(0, 4)}, NewText: "y"},
	})
	if err == nil {
		t.Error("overlapping edits were applied")
	}
}

func TestRegistry(t *testing.T) {
	d := func(line int, msg string) diag {
		return diag{rel: "a.go", line: line, severity: protocol.DiagnosticSeverityError, message: msg}
	}
	r := newRegistry()
	steps := []struct {
		name string
		now  []diag
		want int
	}{
		{"new error", []diag{d(3, "undefined: x")}, 1},
		{"moved four lines down", []diag{d(7, "undefined: x")}, 0},
		{"a second one with the same key", []diag{d(7, "undefined: x"), d(9, "undefined: x")}, 1},
		{"fixed", nil, 0},
		{"reintroduced", []diag{d(7, "undefined: x")}, 1},
	}
	for _, s := range steps {
		if got := r.update("a.go", s.now, nil); len(got) != s.want {
			t.Errorf("%s: %d new, want %d", s.name, len(got), s.want)
		}
	}
	if got := r.update("b.go", []diag{d(1, "old")}, []diag{d(5, "old")}); len(got) != 0 {
		t.Errorf("a problem the file had before the write is not new: %v", got)
	}
}

func TestCapped(t *testing.T) {
	var ds []diag
	for i := 1; i <= 5; i++ {
		ds = append(ds, diag{rel: "a.go", line: i, col: 1, severity: protocol.DiagnosticSeverityWarning, message: "w"})
	}
	ds = append(ds, diag{rel: "b.go", line: 9, col: 2, severity: protocol.DiagnosticSeverityError, message: "e"})
	shown, text := capped(ds, 2, 3)
	if len(shown) != 3 || shown[0].rel != "b.go" {
		t.Errorf("errors first, 3 in all: %v", shown)
	}
	if !strings.HasPrefix(text, "b.go:9:2: error: e\n") || !strings.HasSuffix(text, "… and 3 more") {
		t.Errorf("text:\n%s", text)
	}
}

func TestParseChecker(t *testing.T) {
	out := strings.Join([]string{
		"# example.com/demo",
		"vet: ./main.go:9:17: cannot use \"three\" (untyped string constant) as int value",
		"/work/x/app.py:3:7 - error: \"y\" is not defined (reportUndefinedVariable)",
		"src/main.ts(5,13): error TS2554: Expected 2 arguments, but got 1.",
		"  error - lib/main.dart:2:3 - Undefined name 'x'. - undefined_identifier",
		"src/main.rs:4:5: error[E0425]: cannot find value `y` in this scope",
		"main.c:12:9: error: too many arguments to function 'puts'",
		"1 error, 0 warnings",
	}, "\n")
	got := problemLines(parseChecker(out, "/work/x", host.New().HostPath, "."))
	want := []string{
		"main.go:9:17: cannot use \"three\" (untyped string constant) as int value",
		"app.py:3:7: error: \"y\" is not defined (reportUndefinedVariable)",
		"src/main.ts:5:13: error TS2554: Expected 2 arguments, but got 1.",
		"lib/main.dart:2:3: Undefined name 'x'. - undefined_identifier",
		"src/main.rs:4:5: error[E0425]: cannot find value `y` in this scope",
		"main.c:12:9: error: too many arguments to function 'puts'",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A checker run in a root below the workdir reports paths relative to
// that root; absolute ones are already the workdir's.
func TestParseCheckerInARoot(t *testing.T) {
	out := "vet: ./main.go:9:17: cannot use\n/work/x/svc/app.py:3:7 - error: y\n"
	got := strings.Join(problemLines(parseChecker(out, "/work/x", host.New().HostPath, "svc")), "\n")
	if want := "svc/main.go:9:17: cannot use\nsvc/app.py:3:7: error: y"; got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if got := outermost([]string{".", "a"}); strings.Join(got, ",") != "." {
		t.Errorf("outermost with the workdir: %v", got)
	}
	if got := outermost([]string{"a", "a/b", "ab", "c"}); strings.Join(got, ",") != "a,ab,c" {
		t.Errorf("outermost: %v", got)
	}
}

func yamlUnmarshal(s string, v any) error { return yaml.Unmarshal([]byte(s), v) }
