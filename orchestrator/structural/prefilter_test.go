package structural

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// lexAll renders src's Go tokens one a space ("L" for a literal), or
// "uncertain" where the lexer gives up.
func lexAll(src string) string {
	var out []string
	for i := 0; ; {
		tk, j, ok := goNext([]byte(src), i)
		if !ok {
			return "uncertain"
		}
		if tk.kind == 0 {
			return strings.Join(out, " ")
		}
		i = j
		if tk.kind == tLit {
			out = append(out, "L")
		} else {
			out = append(out, string(tk.text))
		}
	}
}

func TestGoLexer(t *testing.T) {
	cases := []struct{ src, want string }{
		{"x := a[0].b + 1.5e-3", "x : = a [ 0 ] . b + 1.5e-3"},
		{"f(a, b...); g()", "f ( a b . . . ) g ( )"},
		{"s := `raw \" // /* x`", "s : = L"},
		{"s := `multi\nline` + y", "s : = L + y"},
		{`c := '\''; d := '"'`, "c : = L d : = L"},
		{`c := '\x41' + '\u00e9' + '\377' + 'é'`, "c : = L + L + L + L"},
		{"a /* b \n c */ d // e\nf", "a d f"},
		{`s := "a // b /* c \" d"; e`, "s : = L e"},
		{"x := 0x1p-2 + 0b101 + 1_000i + .5", "x : = 0x1p-2 + 0b101 + 1_000i + .5"},
		{"a>>b", "a > > b"},
		// Where the grammar's tokens are uncertain, the lexer says so.
		{"a /* open", "uncertain"},
		{"s := \"open\nx", "uncertain"},
		{"s := `open", "uncertain"},
		{`c := 'ab'`, "uncertain"},
		{`c := ''`, "uncertain"},
		{`s := "\q"`, "uncertain"},
		{"x := 123abc", "uncertain"},
		{"x := 1..2", "uncertain"},
		{"日本 := 1", "uncertain"},
		{"a # b", "uncertain"},
		{"a $ b", "uncertain"},
	}
	for _, c := range cases {
		if got := lexAll(c.src); got != c.want {
			t.Errorf("lex %q = %q, want %q", c.src, got, c.want)
		}
	}
}

func goLang(t testing.TB) *language {
	l := testLangs.byName["go"]
	if l == nil {
		t.Fatal("no go language")
	}
	return l
}

func TestPrefilterRuns(t *testing.T) {
	cases := []struct{ pattern, want string }{
		{"for $K, $V := range $M { $$$B }", "runs: [for] [: = range] [{] [}]"},
		{"go func() { $$$B }()", "runs: [go func ( ) {] [} ( )]"},
		{"if err != nil { return $$$R }", "runs: [if err ! = nil { return] [}]"},
		{`errors.New("x")`, "runs: [errors . New ( <literal> )]"},
		{"make([]byte, $N)", "runs: [make ( [ ] byte] [)]"},
		{"$X /* note */ .Close()", "runs: [. Close ( )]"},
		{"$X", ""},
		{"$F($$$A)", "runs: [(] [)]"},
	}
	for _, c := range cases {
		p, err := compile(context.Background(), goLang(t), c.pattern)
		if err != nil {
			t.Fatalf("%s: %v", c.pattern, err)
		}
		got := ""
		if f := newPrefilter("go", p); f != nil {
			got = f.key
		}
		if got != c.want {
			t.Errorf("%s: runs %q, want %q", c.pattern, got, c.want)
		}
	}
}

func TestPrefilterAdmits(t *testing.T) {
	cases := []struct {
		pattern, src string
		want         bool
	}{
		{"go func() { $$$B }()", "package a\nfunc f() { go g() }", false},
		{"go func() { $$$B }()", "package a\nfunc f() { go func() {}() }", true},
		{"go func() { $$$B }()", "package a\nfunc f() { go /* c */ func(\n) {\n}() }", true},
		{"for $K, $V := range $M { $$$B }", "package a\nfunc f() { for i := 0; i < n; i++ {}; x := range_ }", false},
		{"for $K, $V := range $M { $$$B }", "package a\nfunc f() { for k, v := range m {} }", true},
		// Keywords and punctuation the matcher may skip: chan's arrow.
		{"make(chan $T)", "package a\nvar c = make(<-chan int)", true},
		{`errors.New("x")`, "package a\nvar e = errors.New(`y`)", true},
		{`errors.New("x")`, "package a\nvar e = errors.New(msg)", false},
		{`errors.New("x")`, "package a\n// errors.New(\"x\")\nvar s = \"errors.New(\\\"x\\\")\"", false},
		{"$X.Lock()", "package a\nvar s = \"x.Lock()\"", false},
		// A file the lexer cannot read with certainty is admitted.
		{"$X.Lock()", "package a\nvar s = 'ab'", true},
		// A syntax error tree-sitter recovers from by passing over "foo"
		// is where the filter and the matcher part (see prefilter.go).
		{"go func() { $$$B }()", "package a\nfunc f() { go foo func() {}() }", false},
		// Runs in order.
		{"if $C { return $$$R }", "package a\nfunc f() { return; if x {} }", false},
	}
	for _, c := range cases {
		p, err := compile(context.Background(), goLang(t), c.pattern)
		if err != nil {
			t.Fatalf("%s: %v", c.pattern, err)
		}
		if got := newPrefilter("go", p).admits([]byte(c.src)); got != c.want {
			t.Errorf("%s in %q: admits %v, want %v", c.pattern, c.src, got, c.want)
		}
	}
}

// corpusPatterns are the benchmark's patterns and more, with literals,
// operators, types and keywords the matcher may skip.
var corpusPatterns = []string{
	"defer $X.Close()",
	"if err != nil { return $$$R }",
	"$X.Lock()",
	"for $K, $V := range $M { $$$B }",
	"go func() { $$$B }()",
	"make([]byte, $N)",
	"fmt.Errorf($$$A)",
	`errors.New("x")`,
	`errors.New($S)`,
	`strings.HasPrefix($S, "-")`,
	"$X == nil",
	"$A[$I:]",
	"make(chan $T, $N)",
	"make(chan $T)",
	"switch $X { case $A: $$$B }",
	"switch $V := $X.(type) { case $T: $$$B }",
	"var $V = $E",
	"func($$$P) error { $$$B }",
	"return nil, err",
	"$X++",
	"append($S, $$$E)",
	"'a'",
	"x := 0",
	"$M[$K] = struct{}{}",
	"if $C { $$$A } else { $$$B }",
	"select { case $V := <-$C: $$$B }",
	"len($X) == 0",
	"t.Fatalf($$$A)",
}

// corpusDirs are folders of Go's own source tree: ordinary code, and the
// type checker's test files, many of them deliberately malformed.
var corpusDirs = []string{"net/http", "go", "internal/types/testdata", "encoding/json", "sync", "os"}

// TestPrefilterNeverSkipsAMatch runs the full matcher on every file of the
// corpus that the token-run filter would skip, for every pattern, and
// requires it to find nothing there.
func TestPrefilterNeverSkipsAMatch(t *testing.T) {
	l := goLang(t)
	var pfs []*prefilter
	var ps []*pattern
	for _, s := range corpusPatterns {
		p, err := compile(context.Background(), l, s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		f := newPrefilter("go", p)
		if f == nil {
			t.Fatalf("%s: no token-run filter", s)
		}
		ps, pfs = append(ps, p), append(pfs, f)
	}
	var files []string
	for _, d := range corpusDirs {
		filepath.WalkDir(filepath.Join(runtime.GOROOT(), "src", d), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".go") {
				files = append(files, p)
			}
			return nil
		})
	}
	if len(files) < 1000 {
		t.Fatalf("only %d .go files in the corpus", len(files))
	}
	var (
		mu        sync.Mutex
		skipped   = make([]int, len(ps))
		uncertain int
		wg        sync.WaitGroup
	)
	paths := make(chan string)
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			parser, err := newParser(l.lang)
			if err != nil {
				t.Error(err)
				return
			}
			defer parser.close()
			for path := range paths {
				src, err := os.ReadFile(path)
				if err != nil {
					t.Error(err)
					continue
				}
				src = bytes.TrimPrefix(src, bom)
				var rejected []int
				for k, f := range pfs {
					if !f.admits(src) {
						rejected = append(rejected, k)
					}
				}
				mu.Lock()
				for _, k := range rejected {
					skipped[k]++
				}
				if !certain(src) {
					uncertain++
				}
				mu.Unlock()
				if len(rejected) == 0 {
					continue
				}
				tr, err := parser.parse(context.Background(), src)
				if err != nil {
					t.Errorf("%s: %v", path, err)
					continue
				}
				for _, k := range rejected {
					if ms := find(ps[k], tr); len(ms) > 0 {
						line, _ := position(src, tr.nodes[ms[0].node].start)
						t.Errorf("%s skips %s:%d, which matches", corpusPatterns[k], path, line)
					}
				}
			}
		}()
	}
	for _, f := range files {
		paths <- f
	}
	close(paths)
	wg.Wait()
	t.Logf("%d files, %d the lexer is unsure of", len(files), uncertain)
	for k, s := range corpusPatterns {
		t.Logf("%-36s skips %5d", s, skipped[k])
	}
}

// certain says whether the lexer reads all of src with certainty.
func certain(src []byte) bool {
	for i := 0; ; {
		tk, j, ok := goNext(src, i)
		if !ok || tk.kind == 0 {
			return ok
		}
		i = j
	}
}
