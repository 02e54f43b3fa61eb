package structural

import (
	"strings"
	"testing"
)

// A file whose extension belongs to one language is not parsed as another
// because language names it: ast_grep and ast_edit say what the file is
// and search nothing, as the ast-grep CLI finds nothing there. A .h file
// is both C's and C++'s; an extension no language claims is parsed as
// the language named; and a configured grammar's extensions count as
// the built-in ones do (issue 24 item 10).
func TestExplicitLanguageDoesNotParseAnotherLanguagesFile(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Grammars[0].Extensions = []string{".dart", ".dartx"}
	files := map[string]string{
		"a.py":       "print(x)\n",
		"x.h":        "int f(void) { print(1); return 0; }\n",
		"b.dartx":    "void main() { print(1); }\n",
		"gen.tmpl":   "package a\n\nfunc f() { print(1) }\n",
		"sub/c.go":   "package a\n\nfunc f() { print(1) }\n",
		"sub/d.py":   "print(2)\n",
		"sub/e.h":    "void g(void) { print(2); }\n",
		"sub/f.cpp":  "void g() { print(3); }\n",
		"sub/g.dart": "void main() { print(1); }\n",
	}
	f := newFixture(t, cfg, files)
	for _, tool := range []string{"ast_grep", "ast_edit"} {
		args := func(path, lang string) map[string]any {
			a := map[string]any{"pattern": "print($A)", "path": path, "language": lang}
			if tool == "ast_edit" {
				a["rewrite"] = "show($A)"
			}
			return a
		}
		f.fails(tool, args("a.py", "go"), `^a\.py is a python file by its extension \(\.py\), not go: nothing was searched\. Pass language python, or leave language out`)
		f.fails(tool, args("x.h", "python"), `^x\.h is a c or cpp file by its extension \(\.h\), not python: nothing was searched\. Pass language c or cpp`)
		f.fails(tool, args("b.dartx", "go"), `^b\.dartx is a dart file by its extension \(\.dartx\), not go`)
		f.fails(tool, args("sub/c.go", "python"), `^sub/c\.go is a go file`)
		for _, ok := range []struct{ path, lang, at string }{
			{"x.h", "c", "x.h:1:15"}, {"x.h", "cpp", "x.h:1:15"},
			{"b.dartx", "dart", "b.dartx:1:15"},
			{"gen.tmpl", "go", "gen.tmpl:3:12"},
			{"a.py", "python", "a.py:1:1"},
		} {
			res := f.call(tool, args(ok.path, ok.lang))
			want := ok.at // ast_grep lists the match; ast_edit stages it
			if tool == "ast_edit" {
				want = "(proposed) 1 replacement in 1 file"
			}
			if res.IsError || !strings.Contains(res.FirstText(), want) {
				t.Errorf("%s %s as %s: %s", tool, ok.path, ok.lang, res.FirstText())
			}
		}
	}
	// A folder searched as C++ takes its headers too; as C, no .cpp file.
	for lang, want := range map[string]string{"cpp": "sub/e.h:1:16 sub/f.cpp:1:12", "c": "sub/e.h:1:16"} {
		res := f.call("ast_grep", map[string]any{"pattern": "print($A)", "path": "sub", "language": lang})
		if got := strings.Join(locations(res), " "); got != want {
			t.Errorf("sub as %s: %s, want %s\n%s", lang, got, want, res.FirstText())
		}
	}
}
