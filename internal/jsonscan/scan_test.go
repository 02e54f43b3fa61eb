package jsonscan

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestSkipTakesValidJSON(t *testing.T) {
	for _, v := range []string{
		`{}`, `[]`, `""`, `0`, `-0`, `1.5e-3`, `-12E+2`, `true`, `false`, `null`,
		` { "a" : [ 1 , "b\n\"\\\/\u00e9" , { "c" : null } ] , "d" : -0.0 } `,
		`"naïve 日本語 😀"`,
	} {
		p := New([]byte(v))
		if !p.Skip() || !p.End() {
			t.Errorf("Skip refused %s", v)
		}
	}
}

func TestSkipRefuses(t *testing.T) {
	for _, v := range []string{
		``, `{`, `[1,]`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `01`, `1.`, `.5`, `1e`, `+1`, `-`, `tru`, `nul`,
		`"a`, "\"\x01\"", `"\x"`, `"\u12"`, "\"\xff\"",
		// Valid JSON that is left to encoding/json.
		`{"a":1,"a":2}`, `"\ud83d\ude00"`, strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1),
	} {
		p := New([]byte(v))
		if p.Skip() && p.End() {
			t.Errorf("Skip took %q", v)
		}
	}
}

// A repeated key is found in a large object too (past the few keys
// compared one by one).
func TestObjectFindsRepeatedKeys(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range 1000 {
		fmt.Fprintf(&b, "%q:%d,", fmt.Sprint("k", i), i)
	}
	whole := b.String() + `"last":0}`
	if p := New([]byte(whole)); !p.Skip() || !p.End() {
		t.Fatal("a large object without repeats was refused")
	}
	for _, again := range []string{"k0", "k15", "k16", "k999"} {
		if p := New([]byte(b.String() + fmt.Sprintf("%q:0}", again))); p.Skip() {
			t.Errorf("%s repeated: taken", again)
		}
	}
}

func TestStringDecodes(t *testing.T) {
	for _, v := range []string{`""`, `"plain"`, `"a\tb\nc\"d\\e\/f\u0041\u00e9\b\f\r"`, `"日本"`} {
		got, ok := New([]byte(v)).String()
		var want string
		if err := json.Unmarshal([]byte(v), &want); err != nil {
			t.Fatal(err)
		}
		if !ok || got != want {
			t.Errorf("String(%s) = %q, %v; want %q", v, got, ok, want)
		}
	}
}

func TestNumbers(t *testing.T) {
	for _, tc := range []struct {
		in    string
		plain bool
		n     int64
		isInt bool
	}{
		{"0", true, 0, true}, {"-7", true, -7, true}, {"123456789", true, 123456789, true},
		{"1.0", false, 0, false}, {"1e2", false, 0, false}, {"99999999999999999999", true, 0, false},
	} {
		_, plain, ok := New([]byte(tc.in)).Number()
		if !ok || plain != tc.plain {
			t.Errorf("Number(%s): plain %v ok %v", tc.in, plain, ok)
		}
		n, ok := New([]byte(tc.in)).Int()
		if ok != tc.isInt || n != tc.n {
			t.Errorf("Int(%s) = %d, %v", tc.in, n, ok)
		}
	}
}

// Whatever Skip takes is valid JSON, and a string reads as
// encoding/json reads it.
func FuzzSkip(f *testing.F) {
	for _, s := range []string{`{"a":[1,"x",{"b":null}],"c":true}`, `"\u00e9\n"`, `-1.5e+3`, `[[]]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p := New(b)
		if p.Skip() && p.End() && !json.Valid(b) {
			t.Fatalf("Skip took invalid JSON %q", b)
		}
		if s, ok := New(b).String(); ok {
			var want string
			if err := json.Unmarshal(b[:New(b).stringEnd()], &want); err != nil || want != s {
				t.Fatalf("String(%q) = %q; encoding/json: %q, %v", b, s, want, err)
			}
		}
	})
}

// stringEnd is the offset just past the string at the start of b.
func (p *Scanner) stringEnd() int {
	p.String()
	return p.i
}

// Raw returns a value's text, without the whitespace around it.
func TestRaw(t *testing.T) {
	p := New([]byte(` { "a" : [1, {"b":"}"}] , "c":2}`))
	var got []string
	ok := p.Object(func(key string) bool {
		raw, ok := p.Raw()
		got = append(got, key+"="+string(raw))
		return ok
	})
	if !ok || strings.Join(got, " ") != `a=[1, {"b":"}"}] c=2` {
		t.Fatalf("Raw: %v %q", ok, got)
	}
	if _, ok := New([]byte(`{"a":}`)).Raw(); ok {
		t.Error("Raw took invalid JSON")
	}
}
