package structural

import (
	"context"
	"testing"
)

func TestTokenPrefilter(t *testing.T) {
	cases := []struct {
		tok  token
		src  string
		want bool
	}{
		{token{[]byte("go"), true, false}, "package a; func f() { go g() }", true},
		{token{[]byte("go"), true, false}, "package a // google algorithms goto", false},
		{token{[]byte("go"), true, false}, "go", true},
		{token{[]byte("go"), true, false}, "ago go_ go1 (go)", true},
		{token{[]byte("go"), false, false}, "algorithm", true},
		{token{[]byte("err"), true, false}, "errs, myerr, err2", false},
		{token{[]byte("err"), true, false}, "é err", true},
		{token{[]byte("x"), true, false}, "", false},
		{token{[]byte("go"), true, true}, "//go:build linux\n// we go on\n", false},
		{token{[]byte("go"), true, true}, "// note\n\tgo f()\n", true},
		{token{[]byte("go"), true, true}, "x := \"//\"; go f()", true},
		{token{[]byte("go"), true, true}, "/* a // b */ go f()", true},
		{token{[]byte("go"), true, true}, "s := `\n// go`; go f()", true},
		{token{[]byte("go"), true, false}, "// go", true},
	}
	for _, c := range cases {
		if got := c.tok.in([]byte(c.src)); got != c.want {
			t.Errorf("%s (whole %v) in %q = %v, want %v", c.tok.text, c.tok.whole, c.src, got, c.want)
		}
	}
}

// A match never steps over code that error recovery passed by: an ERROR
// node, even one marked extra, is not a comment.
func TestNoMatchAcrossAnErrorNode(t *testing.T) {
	for _, c := range []struct {
		pattern, src string
		want         int
	}{
		{"go func() { $$$B }()", "package a\nfunc f() { go foo func() {}() }", 0},
		{"go func() { $$$B }()", "package a\nfunc f() { go /* c */ func() {}() }", 1},
	} {
		p, err := compile(context.Background(), goLang(t), c.pattern)
		if err != nil {
			t.Fatal(err)
		}
		parser, err := newParser(goLang(t).lang)
		if err != nil {
			t.Fatal(err)
		}
		defer parser.close()
		tr, err := parser.parse(context.Background(), []byte(c.src))
		if err != nil {
			t.Fatal(err)
		}
		if got := len(find(p, tr)); got != c.want {
			t.Errorf("%s in %q: %d matches, want %d", c.pattern, c.src, got, c.want)
		}
	}
}
