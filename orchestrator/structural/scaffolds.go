package structural

import "fmt"

// scaffold is one context a pattern snippet is parsed in: the snippet
// replaces the "%s" in tmpl.
type scaffold struct {
	name string
	tmpl string
	// statement contexts accept a snippet whose only defect is a missing
	// trailing terminator: "dispose(x)" is a statement without its ";".
	statement bool
	// indent puts the snippet's lines one level in (a Python class body).
	indent bool
}

// ladders are the contexts tried in order, per language: statement,
// expression, class member, declaration, as the language has them. The
// first whose parse has no ERROR or MISSING node wins.
var ladders = map[string][]scaffold{
	"go": {
		{"statement", "package p\nfunc _() {\n%s\n}\n", true, false},
		{"expression", "package p\nvar _ = %s\n", false, false},
		{"struct field", "package p\ntype _ struct {\n%s\n}\n", false, false},
		{"declaration", "package p\n%s\n", false, false},
	},
	"python": {
		{"statement", "%s\n", true, false},
		{"expression", "_ = (\n%s\n)\n", false, false},
		{"class member", "class _:\n%s\n", false, true},
	},
	"javascript": {
		{"statement", "function _() {\n%s\n}\n", true, false},
		{"expression", "_ = (\n%s\n);\n", false, false},
		{"class member", "class _ {\n%s\n}\n", false, false},
		{"declaration", "%s\n", false, false},
	},
	"typescript": {
		{"statement", "function _() {\n%s\n}\n", true, false},
		{"expression", "_ = (\n%s\n);\n", false, false},
		{"class member", "class _ {\n%s\n}\n", false, false},
		{"declaration", "%s\n", false, false},
	},
	"rust": {
		{"statement", "fn _() {\n%s\n}\n", true, false},
		{"expression", "const _: _ = %s;\n", false, false},
		{"impl member", "impl _ {\n%s\n}\n", false, false},
		{"declaration", "%s\n", false, false},
	},
	"c": {
		{"statement", "void _() {\n%s\n}\n", true, false},
		{"expression", "void _() {\n(%s);\n}\n", false, false},
		{"struct member", "struct _ {\n%s\n};\n", false, false},
		{"declaration", "%s\n", false, false},
	},
	"cpp": {
		{"statement", "void _() {\n%s\n}\n", true, false},
		{"expression", "void _() {\n(%s);\n}\n", false, false},
		{"class member", "class _ {\n%s\n};\n", false, false},
		{"declaration", "%s\n", false, false},
	},
	"java": {
		{"statement", "class _ {\nvoid _() {\n%s\n}\n}\n", true, false},
		{"expression", "class _ {\nObject _ = %s;\n}\n", false, false},
		{"class member", "class _ {\n%s\n}\n", false, false},
		{"declaration", "%s\n", false, false},
	},
	"csharp": {
		{"statement", "class _ {\nvoid _() {\n%s\n}\n}\n", true, false},
		{"expression", "class _ {\nobject _ = %s;\n}\n", false, false},
		{"class member", "class _ {\n%s\n}\n", false, false},
		{"declaration", "%s\n", false, false},
	},
	"php": {
		{"statement", "<?php\nfunction _() {\n%s\n}\n", true, false},
		{"expression", "<?php\n$_ = (%s);\n", false, false},
		{"class member", "<?php\nclass _ {\n%s\n}\n", false, false},
		{"declaration", "<?php\n%s\n", false, false},
	},
	"ruby": {
		{"statement", "%s\n", false, false},
		{"class member", "class X_\n%s\nend\n", false, false},
	},
	"bash": {
		{"statement", "%s\n", false, false},
	},
	"dart": {
		{"statement", "void _() {\n%s\n}\n", true, false},
		{"expression", "var _ = %s;\n", false, false},
		{"class member", "class _ {\n%s\n}\n", false, false},
		{"declaration", "%s\n", false, false},
	},
}

func init() { ladders["tsx"] = ladders["typescript"] }

// ladderFor returns the configured scaffolds, else the built-in ladder,
// else the snippet alone.
func ladderFor(name string, configured []string) []scaffold {
	if len(configured) > 0 {
		var l []scaffold
		for i, s := range configured {
			l = append(l, scaffold{name: fmt.Sprintf("configured scaffold %d", i+1), tmpl: s, statement: i == 0})
		}
		return l
	}
	if l, ok := ladders[name]; ok {
		return l
	}
	return []scaffold{{"top level", "%s\n", false, false}}
}
