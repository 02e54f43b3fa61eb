package lsp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"

	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/orchestrator"
)

// escapeLayout makes top/wd (the workdir) and top/outside/pkg, with
// wd/pkglink a symlink to ../outside/pkg, and returns the workdir and the
// outside folder. files are written relative to top.
func escapeLayout(t *testing.T, files map[string]string) (wd, outside string) {
	t.Helper()
	top, _ := filepath.EvalSymlinks(t.TempDir())
	for rel, text := range files {
		p := filepath.Join(top, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wd, outside = filepath.Join(top, "wd"), filepath.Join(top, "outside", "pkg")
	if err := os.Symlink("../outside/pkg", filepath.Join(wd, "pkglink")); err != nil {
		t.Fatal(err)
	}
	return wd, outside
}

// snapshotDir reads every file under dir, to show nothing there changed.
func snapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameFiles(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	if len(before) != len(after) {
		t.Errorf("%s: %d files before, %d after", what, len(before), len(after))
	}
	for p, b := range before {
		if after[p] != b {
			t.Errorf("%s: %s was changed:\n%s", what, p, after[p])
		}
	}
}

// TestRenameThroughSymlinkOutsideIsRefused: a directory symlink
// in the workdir leads out of it. gopls sees the package behind it as
// part of the module; a rename must not write there, and no location or
// diagnostic in it may be shown, since each resolves outside the workdir.
//
// Issue 11 item 1.
func TestRenameThroughSymlinkOutsideIsRefused(t *testing.T) {
	t.Parallel()
	wd, outside := escapeLayout(t, map[string]string{
		"wd/go.mod":           "module example.com/wd\n\ngo 1.22\n",
		"wd/main.go":          "package main\n\nimport \"example.com/wd/pkglink\"\n\nfunc main() {\n\tpkglink.Exported()\n}\n",
		"wd/shared/shared.go": "package shared\n\n// Helper is used from behind the symlink.\nfunc Helper() int { return 1 }\n",
		"outside/pkg/p.go":    "package pkglink\n\nimport \"example.com/wd/shared\"\n\n// Exported is outside the workdir.\nfunc Exported() int { return shared.Helper() }\n",
	})
	f := newFixtureIn(t, wd, "run-escape-go", DefaultConfig())
	before := snapshotDir(t, filepath.Dir(outside))
	inside := snapshotDir(t, wd)

	text, isErr := f.call(t, "lsp_rename", map[string]any{"file": "main.go", "line": 6, "symbol": "pkglink.Exported", "new_name": "Pwned"})
	if !isErr {
		t.Errorf("a rename that reaches outside through a symlink: want it refused, got:\n%s", text)
	}
	contains(t, text, "outside the working directory", "pkglink/p.go", "nothing was written")
	sameFiles(t, "outside after the rename", before, snapshotDir(t, filepath.Dir(outside)))
	sameFiles(t, "the workdir after the refused rename", inside, snapshotDir(t, wd))

	def := f.ok(t, map[string]any{"action": "definition", "file": "main.go", "line": 6, "symbol": "pkglink.Exported"})
	contains(t, def, "definition of \"pkglink.Exported\" at main.go:6: 0", "1 result(s) outside the working directory not shown")
	if strings.Contains(def, "func Exported") || strings.Contains(def, "p.go") {
		t.Errorf("definition shows the file outside:\n%s", def)
	}
	refs := f.ok(t, map[string]any{"action": "references", "file": "shared/shared.go", "line": 4, "symbol": "Helper"})
	contains(t, refs, "shared/shared.go:4:6", "1 result(s) outside the working directory not shown")
	if strings.Contains(refs, "shared.Helper()") {
		t.Errorf("references show the line outside:\n%s", refs)
	}
	syms := f.ok(t, map[string]any{"action": "symbols", "query": "Exported", "file": "main.go"})
	contains(t, strings.SplitN(syms, "\n", 2)[0], "match(es) of gopls outside the working directory not shown")
	if strings.Contains(syms, "p.go") {
		t.Errorf("workspace symbols show the file outside:\n%s", syms)
	}

	// A write that breaks the package behind the link: its problem is
	// not shown, and the write is not called clean either.
	rep := f.write(t, "shared/shared.go", "package shared\n\n// Helper2 is renamed.\nfunc Helper2() int { return 1 }\n")
	for _, d := range rep.Diagnostics {
		if strings.Contains(d.Path, "p.go") {
			t.Errorf("didWrite reports a file outside: %+v", d)
		}
	}
	if rep.State == orchestrator.WriteClean || strings.Contains(rep.Text, "p.go") {
		t.Errorf("a write that broke a file outside: want not clean and no outside path, got %s:\n%s", rep.State, rep.Text)
	}
	contains(t, rep.Text, "outside the working directory")
	sameFiles(t, "outside at the end", before, snapshotDir(t, filepath.Dir(outside)))
}

// TestPyrightRenameThroughSymlinkOutsideIsRefused is the same escape with
// pyright, which follows the import into the linked folder: it names the
// file outside by its real path.
//
// Issue 11 item 1.
func TestPyrightRenameThroughSymlinkOutsideIsRefused(t *testing.T) {
	t.Parallel()
	wd, outside := escapeLayout(t, map[string]string{
		"wd/pyproject.toml":       "[project]\nname = \"wd\"\n",
		"wd/main.py":              "from pkglink.p import exported\n\nprint(exported())\n",
		"outside/pkg/__init__.py": "",
		"outside/pkg/p.py":        "def exported() -> int:\n    \"\"\"Outside the workdir.\"\"\"\n    return 1\n",
	})
	f := newFixtureIn(t, wd, "run-escape-py", DefaultConfig())
	before := snapshotDir(t, filepath.Dir(outside))
	inside := snapshotDir(t, wd)
	text, isErr := f.call(t, "lsp_rename", map[string]any{"file": "main.py", "line": 3, "symbol": "exported", "new_name": "pwned"})
	if !isErr {
		t.Errorf("a rename that reaches outside through a symlink: want it refused, got:\n%s", text)
	}
	// pyright resolves the link itself and calls the function a library
	// symbol it will not rename; either refusal writes nothing.
	sameFiles(t, "outside after the rename", before, snapshotDir(t, filepath.Dir(outside)))
	sameFiles(t, "the workdir after the refused rename", inside, snapshotDir(t, wd))
	def := f.ok(t, map[string]any{"action": "definition", "file": "main.py", "line": 3, "symbol": "exported"})
	contains(t, def, "1 result(s) outside the working directory not shown")
	if strings.Contains(def, "def exported") {
		t.Errorf("definition shows the file outside:\n%s", def)
	}
}

// A rename's file operations are checked like its edits: one that
// creates, renames or deletes a file through the link out of the workdir
// refuses the rename, naming it (issue 11 item 1).
func TestRenameFileOperationOutsideIsRefused(t *testing.T) {
	wd, _ := escapeLayout(t, map[string]string{"wd/a.go": "package a\n", "outside/pkg/p.go": "package p\n"})
	s := &server{cfg: ServerConfig{Name: "gopls"}, paths: pathMap{workdir: wd, encl: host.New()}}
	s.paths.bind(testRoot(t, wd))
	for _, op := range []protocol.DocumentChange{
		&protocol.CreateFile{URI: uri.File(filepath.Join(wd, "pkglink", "new.go"))},
		&protocol.RenameFile{OldURI: uri.File(filepath.Join(wd, "a.go")), NewURI: uri.File(filepath.Join(wd, "pkglink", "a.go"))},
		&protocol.DeleteFile{URI: uri.File(filepath.Join(wd, "pkglink", "p.go"))},
	} {
		_, err := fileEdits(s, &protocol.WorkspaceEdit{DocumentChanges: []protocol.DocumentChange{op}})
		if err == nil || !strings.Contains(err.Error(), "outside the working directory") || !strings.Contains(err.Error(), "pkglink/") {
			t.Errorf("%T through the link: %v", op, err)
		}
	}
	_, err := fileEdits(s, &protocol.WorkspaceEdit{DocumentChanges: []protocol.DocumentChange{&protocol.CreateFile{URI: uri.File(filepath.Join(wd, "b.go"))}}})
	if err == nil || !strings.Contains(err.Error(), "creates, renames or deletes files") {
		t.Errorf("a file operation inside: %v", err)
	}
}
