package lspdirect

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The client drives a real gopls: a definition and a references request
// are answered, and a write is published.
func TestClientAgainstGopls(t *testing.T) {
	ctx, dir := project(t, "gopls", map[string]string{"go.mod": "module example.com/a\n\ngo 1.22\n",
		"a.go": "package a\n\nfunc F() {}\n\nfunc G() { F() }\n"})
	c, err := Start(ctx, dir, dir, "gopls")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	path := filepath.Join(dir, "a.go")
	for _, action := range []string{"references", "definition"} {
		d, err := c.Request(ctx, action, path, 4, 11) // F in G's body
		if err != nil || d <= 0 {
			t.Errorf("%s = %v, %v", action, d, err)
		}
	}
	if _, err := c.Request(ctx, "hover", path, 4, 11); err == nil {
		t.Error("an action other than definition and references was not refused")
	}
	// A server that cannot start says why, and is not left running.
	if _, err := Start(ctx, dir, dir, "sh", "-c", "echo no such server >&2; exit 3"); err == nil || !strings.Contains(err.Error(), "no such server") {
		t.Errorf("Start of a command that exits = %v, want an error with its stderr", err)
	}
	if _, err := Start(ctx, dir, dir); err == nil || !strings.Contains(err.Error(), "give the server's argv") {
		t.Errorf("Start with no command = %v, want an error saying what to give", err)
	}
	wdir := t.TempDir()
	if err := os.WriteFile(filepath.Join(wdir, "go.mod"), []byte("module example.com/w\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := Start(ctx, wdir, wdir, "gopls")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if d, err := w.Write(ctx, filepath.Join(wdir, "w.go"), "package w\n\nvar X int = \"no\"\n"); err != nil || d <= 0 {
		t.Errorf("Write = %v, %v; want the time to gopls's publish", d, err)
	}
}

// The client drives another server of the catalog, pyright, with its
// entry's command and language id: references are answered.
func TestClientAgainstPyright(t *testing.T) {
	ctx, dir := project(t, "pyright-langserver", map[string]string{"pyproject.toml": "[project]\nname = \"a\"\n",
		"a.py": "def f():\n    return 1\n\n\nprint(f())\n"})
	c, err := StartServer(ctx, "pyright", dir, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Asked again once pyright's analysis (its work-done progress) has
	// ended: the end of a progress is handled without harm.
	for i := range 3 {
		if d, err := c.Request(ctx, "references", filepath.Join(dir, "a.py"), 4, 6); err != nil || d <= 0 {
			t.Errorf("references %d = %v, %v", i, d, err)
		}
		time.Sleep(time.Second)
	}
	if _, err := StartServer(ctx, "no-such-server", dir, dir); err == nil || !strings.Contains(err.Error(), "no server") {
		t.Errorf("StartServer of a server not in the catalog = %v, want an error naming it", err)
	}
}

// project lays files out in a directory of the test's for a server whose
// executable is exe (on PATH, else the test fails), and returns it with a
// context that bounds the test.
func project(t *testing.T, exe string, files map[string]string) (context.Context, string) {
	t.Helper()
	if _, err := exec.LookPath(exe); err != nil {
		t.Fatalf("%s is not on PATH (scripts/setup installs it): %v", exe, err)
	}
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx, dir
}
