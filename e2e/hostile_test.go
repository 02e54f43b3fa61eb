package e2e

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The "hostile workspace" of issue 11, through the real binary: folders
// symlinked out of the workdir, a FIFO, a socket, and a folder swapped for
// a symlink out while calls run. ast_grep, ast_edit and resolve, and lsp,
// read and write no byte outside the workdir, and every call is answered
// (with a clear error where one is due).
func TestHostileWorkspaceReadsAndWritesNothingOutside(t *testing.T) {
	dir := copyProject(t, "go")
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// Outside the workdir: a package a link leads to, a copy of sub (the
	// same bytes, so a hash check passes through a swapped link), and a
	// folder whose files say ESCAPED, which no answer may show.
	const subSrc = "package sub\n\nfunc F() {\n\tdone(1)\n}\n\nfunc done(int) {}\n"
	outside := map[string]string{
		"pkg/p.go":     "package pkglink\n\n// Exported is outside the workdir.\nfunc Exported() {} // ESCAPED\n",
		"same/f.go":    subSrc,
		"marked/f.go":  "package sub\n\nfunc F() {\n\tdone(2) // ESCAPED\n}\n\nfunc done(int) {}\n",
		"marked/g.txt": "ESCAPED",
	}
	for name, content := range outside {
		mustWrite(t, filepath.Join(base, name), content)
	}
	before := snapshot(t, base)

	mustWrite(t, filepath.Join(dir, "sub", "f.go"), subSrc)
	mustWrite(t, filepath.Join(dir, "main.go"), "package main\n\nimport \"example.com/demo/pkglink\"\n\nfunc main() {\n\tpkglink.Exported()\n}\n")
	markedRel, err := filepath.Rel(dir, filepath.Join(base, "marked"))
	if err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"pkglink": filepath.Join(base, "pkg"), "marked": markedRel} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	// In testdata/, which the go command and gopls pass over: gopls itself
	// would block reading a FIFO among a package's files.
	if err := os.Mkdir(filepath.Join(dir, "testdata"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "testdata", "fifo.go"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(dir, "testdata", "sock.go"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	c := startStdio(t)
	run := newRun(t, c, dir, nil)
	// The swap loop below runs in a run of its own without language
	// servers: a write's check by gopls is not what it tests.
	quick := newRun(t, c, dir, map[string]bool{"lsp": false})
	current := run
	call := func(name string, args map[string]any) (string, bool) {
		t.Helper()
		res := callTool(t, c, current, name, args)
		got := text(res)
		if strings.Contains(got, "ESCAPED") {
			t.Fatalf("%s %v showed an outside file:\n%s", name, args, got)
		}
		return got, res.IsError
	}
	wantError := func(name string, args map[string]any, want string) {
		t.Helper()
		if got, isErr := call(name, args); !isErr || !strings.Contains(got, want) {
			t.Errorf("%s %v: want an error saying %q, got:\n%s", name, args, want, got)
		}
	}

	// A search of the whole workdir passes over the links, the FIFO and
	// the socket.
	if got, isErr := call("ast_grep", map[string]any{"pattern": "done($X)", "language": "go"}); isErr || !strings.HasPrefix(got, "1 match(es) in 1 file(s)") {
		t.Errorf("ast_grep over the workdir:\n%s", got)
	}
	wantError("ast_grep", map[string]any{"pattern": "done($X)", "path": "testdata/fifo.go"}, "testdata/fifo.go is a named pipe, not a regular file: pass a source file")
	wantError("ast_grep", map[string]any{"pattern": "done($X)", "path": "testdata/sock.go"}, "testdata/sock.go is a socket, not a regular file: pass a source file")
	wantError("ast_grep", map[string]any{"pattern": "func $F() {}", "path": "pkglink/p.go"}, "outside the working directory")
	wantError("ast_edit", map[string]any{"pattern": "done($X)", "rewrite": "x", "path": "marked"}, "outside the working directory")

	// lsp: a FIFO is refused, and a definition through the link to the
	// outside package does not show its line.
	wantError("lsp", map[string]any{"action": "definition", "file": "testdata/fifo.go", "line": 1, "symbol": "x"}, "testdata/fifo.go is a named pipe")
	if got, _ := call("lsp", map[string]any{"action": "definition", "file": "main.go", "line": 6, "symbol": "Exported"}); !strings.Contains(got, "(1 result(s) outside the working directory not shown)") {
		t.Errorf("lsp definition through the link to the outside package:\n%s", got)
	}

	// The write: stage a change of sub/f.go, swap sub for a link
	// to the outside copy, accept.
	if got, isErr := call("ast_edit", map[string]any{"pattern": "done($X)", "rewrite": "finish($X)", "path": "sub/f.go"}); isErr {
		t.Fatalf("ast_edit: %s", got)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Rename(sub, filepath.Join(dir, ".sub-real")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(base, "same"), sub); err != nil {
		t.Fatal(err)
	}
	wantError("resolve", map[string]any{"edit_id": "edit_1", "action": "accept"}, "nothing was written")
	os.Remove(sub)
	if err := os.Rename(filepath.Join(dir, ".sub-real"), sub); err != nil {
		t.Fatal(err)
	}

	// A folder swapped again and again for a link to the outside copies
	// while searches, edits and accepts run: every call is answered, and
	// none reads or writes outside.
	current = quick
	var (
		done atomic.Bool
		wg   sync.WaitGroup
		// swapping is held while sub is not the real folder, so the test's
		// own putting back of a file never goes through the link.
		swapping sync.Mutex
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		hold := filepath.Join(dir, ".sub-hold")
		for i := 0; !done.Load(); i++ {
			swapping.Lock()
			if os.Rename(sub, hold) != nil {
				swapping.Unlock()
				return
			}
			target := filepath.Join(base, "same")
			if i%2 == 1 {
				target = markedRel // relative, and its content is marked
			}
			os.Symlink(target, sub)
			time.Sleep(time.Millisecond)
			os.Remove(sub)
			os.Rename(hold, sub)
			swapping.Unlock()
			time.Sleep(time.Millisecond)
		}
	}()
	accepted := 0
	for i := range 60 {
		call("ast_grep", map[string]any{"pattern": "done($X)", "language": "go"})
		call("ast_grep", map[string]any{"pattern": "done($X)", "path": "sub/f.go"})
		got, isErr := call("ast_edit", map[string]any{"pattern": "done($X)", "rewrite": "done($X)+0", "path": "sub", "language": "go"})
		if !isErr && strings.Contains(got, "edit_id") {
			id := got[strings.Index(got, `edit_id "`)+len(`edit_id "`):]
			id = id[:strings.IndexByte(id, '"')]
			if got, isErr := call("resolve", map[string]any{"edit_id": id, "action": "accept"}); !isErr {
				accepted++
				// Written inside: put the original back for the next round.
				mustWrite(t, filepath.Join(dir, ".f.go.back"), subSrc)
				swapping.Lock()
				err := os.Rename(filepath.Join(dir, ".f.go.back"), filepath.Join(sub, "f.go"))
				swapping.Unlock()
				if err != nil {
					t.Fatalf("round %d: %v (after %s)", i, err, got)
				}
			}
		}
	}
	done.Store(true)
	wg.Wait()
	t.Logf("%d of 60 edits staged and accepted inside while sub was swapped", accepted)

	if after := snapshot(t, base); after != before {
		t.Fatalf("the outside folders changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// snapshot lists every file under dir with its size, mode, modification
// time and content hash.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		line := rel + " " + st.Mode().String() + " " + st.ModTime().String()
		if st.Mode().IsRegular() {
			content, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %d %x", len(content), sha256.Sum256(content))
		}
		b.WriteString(line + "\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
