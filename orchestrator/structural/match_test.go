package structural

import "testing"

func TestTokenPrefilter(t *testing.T) {
	cases := []struct {
		tok  token
		src  string
		want bool
	}{
		{token{[]byte("go"), true}, "package a; func f() { go g() }", true},
		{token{[]byte("go"), true}, "package a // google algorithms goto", false},
		{token{[]byte("go"), true}, "go", true},
		{token{[]byte("go"), true}, "ago go_ go1 (go)", true},
		{token{[]byte("go"), false}, "algorithm", true},
		{token{[]byte("err"), true}, "errs, myerr, err2", false},
		{token{[]byte("err"), true}, "é err", true},
		{token{[]byte("x"), true}, "", false},
	}
	for _, c := range cases {
		if got := c.tok.in([]byte(c.src)); got != c.want {
			t.Errorf("%s (whole %v) in %q = %v, want %v", c.tok.text, c.tok.whole, c.src, got, c.want)
		}
	}
}
