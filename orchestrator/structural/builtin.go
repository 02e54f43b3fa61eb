package structural

import (
	"unsafe"

	tsbash "github.com/tree-sitter/tree-sitter-bash/bindings/go"
	tscsharp "github.com/tree-sitter/tree-sitter-c-sharp/bindings/go"
	tsc "github.com/tree-sitter/tree-sitter-c/bindings/go"
	tscpp "github.com/tree-sitter/tree-sitter-cpp/bindings/go"
	tsgo "github.com/tree-sitter/tree-sitter-go/bindings/go"
	tsjava "github.com/tree-sitter/tree-sitter-java/bindings/go"
	tsjs "github.com/tree-sitter/tree-sitter-javascript/bindings/go"
	tsphp "github.com/tree-sitter/tree-sitter-php/bindings/go"
	tspython "github.com/tree-sitter/tree-sitter-python/bindings/go"
	tsruby "github.com/tree-sitter/tree-sitter-ruby/bindings/go"
	tsrust "github.com/tree-sitter/tree-sitter-rust/bindings/go"
	tsts "github.com/tree-sitter/tree-sitter-typescript/bindings/go"
)

// builtin is a grammar compiled into the binary.
type builtin struct {
	name       string
	extensions []string
	language   func() unsafe.Pointer
}

// builtins are the grammars linked from the official binding modules.
var builtins = []builtin{
	{"bash", []string{".sh", ".bash"}, tsbash.Language},
	{"c", []string{".c", ".h"}, tsc.Language},
	{"cpp", []string{".cc", ".cpp", ".cxx", ".hpp", ".hh", ".hxx"}, tscpp.Language},
	{"csharp", []string{".cs"}, tscsharp.Language},
	{"go", []string{".go"}, tsgo.Language},
	{"java", []string{".java"}, tsjava.Language},
	{"javascript", []string{".js", ".mjs", ".cjs", ".jsx"}, tsjs.Language},
	{"php", []string{".php"}, tsphp.LanguagePHP},
	{"python", []string{".py", ".pyi"}, tspython.Language},
	{"ruby", []string{".rb"}, tsruby.Language},
	{"rust", []string{".rs"}, tsrust.Language},
	{"tsx", []string{".tsx"}, tsts.LanguageTSX},
	{"typescript", []string{".ts", ".mts", ".cts"}, tsts.LanguageTypescript},
}

// alsoReads are extensions of another language's files that a language
// reads as its own too: a C++ project's headers are often .h, which is
// C's by inference, and either grammar may be the right one.
var alsoReads = map[string][]string{"cpp": {".h"}}
