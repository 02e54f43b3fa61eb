package lsp

import (
	"os"
	"path/filepath"
	"testing"
)

// undefinedCalls is a project checker for the fake language: a line
// "call NAME" needs a line starting "NAME " in some file.
const undefinedCalls = `for f in *.fake; do grep -n '^call ' "$f" | while IFS=: read -r n line; do ` +
	`name=${line#call }; cat *.fake | grep -q "^$name " || echo "$f:$n:1: undefined: $name"; done; done`

// TestPartialRenameIsNotCalledClean: a server that renames
// in the one file it was asked about (as tsserver did while it loaded the
// project) leaves a caller broken. The rename reports what the project
// checker and a search for the old name find, in its first line, and
// says "No new problems" only when there is nothing to find.
//
// Issue 11 item 9.
func TestPartialRenameIsNotCalledClean(t *testing.T) {
	rename := map[string]any{"file": "a.fake", "line": 1, "symbol": "hello", "new_name": "bye"}
	t.Run("with a checker", func(t *testing.T) {
		conf := fakeConfig("-mode", "partial-rename")
		conf.Servers[0].Checker = []string{"sh", "-c", undefinedCalls}
		f := newFixture(t, "fake", conf)
		if err := os.WriteFile(filepath.Join(f.dir, "b.fake"), []byte("call hello\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		text, isErr := f.call(t, "lsp_rename", rename)
		if isErr {
			t.Fatal(text)
		}
		contains(t, text, `Renamed "hello" to "bye": 1 edit(s) in 1 file(s). Check it: 1 new problem(s); "hello" still occurs 1 time(s) in fake files`,
			"New problems from sh -c", "b.fake:1:1: undefined: hello", `"hello" still occurs at:`, "b.fake:1:6: call hello")
		if contains(t, f.read(t, "a.fake"), "bye fake"); t.Failed() {
			return
		}
		// The caller follows by hand and the next rename breaks it again;
		// without a caller, there is nothing left to find.
		if err := os.WriteFile(filepath.Join(f.dir, "b.fake"), []byte("call bye\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		text, _ = f.call(t, "lsp_rename", map[string]any{"file": "a.fake", "line": 1, "symbol": "bye", "new_name": "ciao"})
		contains(t, text, "Check it: 1 new problem(s)", "b.fake:1:1: undefined: bye")
		if err := os.WriteFile(filepath.Join(f.dir, "b.fake"), []byte("no calls\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		text, _ = f.call(t, "lsp_rename", map[string]any{"file": "a.fake", "line": 1, "symbol": "ciao", "new_name": "salut"})
		contains(t, text, `No new problems: sh -c`, `found none, and "ciao" occurs nowhere else in fake files under the workdir.`)
	})
	t.Run("without a checker", func(t *testing.T) {
		f := newFixture(t, "fake", fakeConfig("-mode", "partial-rename"))
		text, isErr := f.call(t, "lsp_rename", rename)
		if isErr {
			t.Fatal(text)
		}
		contains(t, text, `Renamed "hello" to "bye": 1 edit(s) in 1 file(s). Not fully checked: no project checker is configured for fakelsp`)
	})
}
