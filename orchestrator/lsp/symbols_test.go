package lsp

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestWorkspaceSymbolsAskEveryLanguageWithFiles: a workspace search
// without a file, in a workdir with a Go module at its root and a Python
// project in pyproj/, asks gopls and pyright both, and its first line
// says which servers it asked in which roots. It answered from gopls
// alone and did not say that pyright was not asked (issue 24 item 15).
func TestWorkspaceSymbolsAskEveryLanguageWithFiles(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	copyTree(t, filepath.Join("testdata", "go"), dir)
	copyTree(t, filepath.Join("testdata", "py"), filepath.Join(dir, "pyproj"))
	f := newFixtureIn(t, dir, "run-mixed", DefaultConfig())
	text := f.ok(t, map[string]any{"action": "symbols", "query": "Greeter"})
	first, _, _ := strings.Cut(text, "\n")
	contains(t, first, `workspace symbols matching "Greeter"`, "asked gopls in ., pyright in pyproj")
	contains(t, text, "interface Greeter in example.com/demo/greet — greet/greet.go:5:6", "class Greeter — pyproj/greet.py:4:7")
}

// TestWorkspaceSymbolsSayWhichRootsWereNotAsked: a language whose files
// have a root no server can serve there (its executable is missing) is
// named with the reason, beside the servers that were asked (issue 24
// item 15).
func TestWorkspaceSymbolsSayWhichRootsWereNotAsked(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	copyTree(t, filepath.Join("testdata", "go"), dir)
	copyTree(t, filepath.Join("testdata", "py"), filepath.Join(dir, "pyproj"))
	f := newFixtureIn(t, dir, "run-mixed-missing", DefaultConfig(), "pyright-langserver", "pylsp")
	text := f.ok(t, map[string]any{"action": "symbols", "query": "Greeter"})
	first, _, _ := strings.Cut(text, "\n")
	contains(t, first, "asked gopls in .")
	contains(t, text, `python in pyproj was not searched: pyright: executable "pyright-langserver" not found`, `pylsp: executable "pylsp" not found`)
}
