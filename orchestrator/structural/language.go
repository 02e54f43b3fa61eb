package structural

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	sitter "github.com/tree-sitter/go-tree-sitter"
)

// language is one grammar the tools can use.
type language struct {
	name string
	// extensions are its files' endings, each with the dot; the first
	// language to list one is the one inferred for it.
	extensions []string
	// reads are the extensions whose files it parses: its own and the
	// ones in alsoReads.
	reads  []string
	lang   *sitter.Language // nil when unavailable
	ladder []scaffold
	// unavailable says why an optional grammar could not be loaded.
	unavailable string
	// sigil is how a placeholder identifier starts: "$" in PHP, where
	// variables carry it, so "$X" stays a variable.
	sigil string
	// terminator ends a statement; a statement pattern may leave it out.
	terminator string
}

// terminators are the statement terminators of the languages that have
// one.
var terminators = map[string]string{
	"c": ";", "cpp": ";", "csharp": ";", "dart": ";", "java": ";", "javascript": ";",
	"php": ";", "rust": ";", "tsx": ";", "typescript": ";",
}

// languages is the set built at start.
type languages struct {
	byName map[string]*language
	byExt  map[string]*language
}

// loadLanguages builds the compiled-in grammars and loads the configured
// libraries. A required library that cannot be loaded is an error; an
// optional one is recorded as unavailable with the reason.
func loadLanguages(grammars []GrammarConfig) (*languages, error) {
	ls := &languages{byName: map[string]*language{}, byExt: map[string]*language{}}
	for _, b := range builtins {
		ls.add(&language{name: b.name, extensions: b.extensions, lang: sitter.NewLanguage(b.language()), ladder: ladderFor(b.name, nil)})
	}
	for _, g := range grammars {
		if g.Name == "" || g.Library == "" || g.Symbol == "" {
			return nil, fmt.Errorf("structural.grammars: an entry needs name, library and symbol (got name %q, library %q, symbol %q)", g.Name, g.Library, g.Symbol)
		}
		if _, dup := ls.byName[g.Name]; dup {
			return nil, fmt.Errorf("structural.grammars: %q is already a language: pick another name", g.Name)
		}
		if len(g.Extensions) == 0 {
			return nil, fmt.Errorf("structural.grammars %q: extensions is empty, so no file would ever be searched as %s: list its file endings, e.g. [\".%s\"]", g.Name, g.Name, g.Name)
		}
		l := &language{name: g.Name, extensions: dotted(g.Extensions), ladder: ladderFor(g.Name, g.Scaffolds)}
		lang, err := loadLibrary(expandPath(g.Library), g.Symbol)
		switch {
		case err == nil:
			l.lang = lang
		case g.Optional:
			l.unavailable = err.Error()
		default:
			return nil, fmt.Errorf("structural.grammars %q: %w", g.Name, err)
		}
		ls.add(l)
	}
	return ls, nil
}

// dotted writes each extension with its leading dot ("dart" → ".dart"),
// as a file name's extension is compared with it.
func dotted(exts []string) []string {
	out := make([]string, len(exts))
	for i, e := range exts {
		if !strings.HasPrefix(e, ".") {
			e = "." + e
		}
		out[i] = e
	}
	return out
}

func (ls *languages) add(l *language) {
	if l.name == "php" {
		l.sigil = "$"
	}
	l.terminator = terminators[l.name]
	for _, e := range append(append([]string(nil), l.extensions...), alsoReads[l.name]...) {
		l.reads = append(l.reads, strings.ToLower(e))
	}
	ls.byName[l.name] = l
	for _, e := range l.extensions {
		ls.byExt[strings.ToLower(e)] = l
	}
}

// readers are the languages that read files with extension ext (with
// its dot), sorted by name.
func (ls *languages) readers(ext string) []string {
	var out []string
	for _, l := range ls.byName {
		if l.owns("x" + ext) {
			out = append(out, l.name)
		}
	}
	sort.Strings(out)
	return out
}

// names lists the language ids, sorted.
func (ls *languages) names() []string {
	var n []string
	for k := range ls.byName {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// pick chooses the language: the one named, else the one of the file's
// extension. isDir says path is a folder, where the name is required. A
// file that is another language's by its extension is refused, not
// parsed as the one named (ast-grep finds nothing there either); a file
// whose extension no language claims is read as the one named.
func (ls *languages) pick(name, path string, isDir bool) (*language, error) {
	var l *language
	switch {
	case name != "":
		l = ls.byName[strings.ToLower(name)]
		if l == nil {
			return nil, fmt.Errorf("unknown language %q: use one of %s", name, strings.Join(ls.names(), ", "))
		}
		ext := strings.ToLower(filepath.Ext(path))
		if rs := ls.readers(ext); !isDir && len(rs) > 0 && !l.owns(path) {
			which := strings.Join(rs, " or ")
			return nil, fmt.Errorf("%s is a %s file by its extension (%s), not %s: nothing was searched. Pass language %s, or leave language out to infer it from the extension",
				path, which, ext, l.name, which)
		}
	case isDir:
		return nil, fmt.Errorf("language is required when path is a folder: pass one of %s", strings.Join(ls.names(), ", "))
	default:
		l = ls.byExt[strings.ToLower(filepath.Ext(path))]
		if l == nil {
			return nil, fmt.Errorf("cannot tell the language of %s from its extension: pass language, one of %s", path, strings.Join(ls.names(), ", "))
		}
	}
	if l.lang == nil {
		return nil, fmt.Errorf("language %s is unavailable: %s. Its grammar library must be built and named in the configuration's structural.grammars (scripts/setup builds the Dart one); until then none of its files can be searched", l.name, l.unavailable)
	}
	return l, nil
}

// owns says whether language l reads a file, by its extension: its own
// extensions and the ones alsoReads gives it.
func (l *language) owns(path string) bool {
	ext := strings.ToLower(filepath.Ext(path))
	for _, e := range l.reads {
		if e == ext {
			return true
		}
	}
	return false
}
