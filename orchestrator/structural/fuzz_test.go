package structural

import (
	"context"
	"errors"
	"testing"
)

// FuzzCompile: no pattern crashes the compiler, in any language, nor the
// rewrite compiler; every failure is a pattern error the model can read.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{
		"fmt.Errorf($$$A)", "if ($X != null) $X.dispose()", "dispose($X)", "f($$$A, $B)", "$X", "$$$", "$_",
		"", "((", "a(); b()", `"$X"`, "$Xfoo", "$$$A $$$A", "$A $$$A", "<Button $$$A>$$$C</Button>", "$", "$$", "\x00",
		"func $F($$$P) { $$$B }", "class $C { $$$M }", "#define $X", "<?php $x", "if x:\n  $$$B",
	} {
		f.Add(s, uint8(0))
	}
	names := testLangs.names()
	f.Fuzz(func(t *testing.T, pattern string, which uint8) {
		l := testLangs.byName[names[int(which)%len(names)]]
		if l.lang == nil {
			return
		}
		p, err := compile(context.Background(), l, pattern)
		if err != nil {
			if !errors.Is(err, ErrPattern) {
				t.Fatalf("%s pattern %q: an error that is not about the pattern: %v", l.name, pattern, err)
			}
			return
		}
		ms := find(p, p.t) // the pattern's own tree is a valid target
		// The same text as a rewrite compiles, or fails as a pattern
		// error, and renders for every match.
		tp, err := compileTemplate(pattern, p.bound)
		if err != nil {
			if !errors.Is(err, ErrRewrite) {
				t.Fatalf("%s rewrite %q: an error that is not about the rewrite: %v", l.name, pattern, err)
			}
			return
		}
		for _, m := range ms {
			start, _ := p.extent(p.t, m)
			tp.render(p.t, start, m.bindings, false)
		}
	})
}
