package structural

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// A rewrite that breaks a file at line 76 is reported at line 76, not at
// 1:1 where an ERROR node that tree-sitter's recovery wrapped around the
// whole file begins, nor at an error the file already had before the
// rewrite (issue 24 item 19).
func TestEditReportsWhereTheRewriteBrokeTheSyntax(t *testing.T) {
	var goSrc strings.Builder
	goSrc.WriteString("package a\n\n")
	for i := 3; i < 76; i++ {
		fmt.Fprintf(&goSrc, "func f%d() { done(%d) }\n", i, i)
	}
	goSrc.WriteString("func last() { finish(1) }\n")
	// An error the file already has, on line 3: the report is of the new one.
	goOld := strings.Replace(goSrc.String(), "func f3() { done(3) }", "func f3() { done(3 }", 1)
	ts := strings.Repeat("export const f = (x: number) => g(x);\n", 75) + "export const h = (x: number) => last(x);\n"

	cases := []struct {
		name, file, src, pattern, rewrite, at string
	}{
		{"typescript, recovery makes the root an ERROR node", "a.ts", ts, "last($A)", ">{last($A)", "76:33"},
		{"go, the file had an error already", "a.go", goOld, "finish($A)", "finish($A))", "76:24"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, DefaultConfig(), map[string]string{c.file: c.src})
			out := f.ok("ast_edit", map[string]any{"pattern": c.pattern, "rewrite": c.rewrite, "path": c.file})
			m := regexp.MustCompile(`new syntax error\(s\), the first at (\d+:\d+)`).FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("the proposal does not say where the syntax broke:\n%s", out)
			}
			if m[1] != c.at {
				t.Errorf("the break is reported at %s, want %s\n%s", m[1], c.at, out)
			}
		})
	}
}

// An offset before the edits is kept, one after them moves by what they
// added or removed, and one inside a replaced text has no counterpart.
func TestOffsetsMoveWithTheEdits(t *testing.T) {
	edits := []edit{{start: 10, end: 12, text: "abcde"}, {start: 20, end: 30, text: ""}, {start: 40, end: 40, text: "xy"}}
	for _, c := range []struct {
		off, want uint32
		ok        bool
	}{{5, 5, true}, {10, 10, true}, {11, 0, false}, {12, 15, true}, {20, 23, true}, {25, 0, false}, {30, 23, true}, {40, 33, true}, {41, 36, true}} {
		got, ok := shifted(c.off, edits)
		if got != c.want || ok != c.ok {
			t.Errorf("shifted(%d) = %d, %v; want %d, %v", c.off, got, ok, c.want, c.ok)
		}
	}
}
