package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-dev/berth/enclosure/mounts"
)

// crossingView is a container's view made of the drivers' own path
// arithmetic (mounts.Crossing, what Docker's, containerd's and
// Kubernetes's MapPath, HostPath and Writable are).
type crossingView struct{ c mounts.Crossing }

func (v crossingView) MapPath(p string) (string, error)  { return v.c.Inside(p) }
func (v crossingView) HostPath(p string) (string, error) { return v.c.Outside(p) }
func (v crossingView) Writable(p string) error           { return v.c.Writable(p) }

// containerRoot is a root on a fresh workdir that a container sees at
// /workspace (read-only when ro), with a second mount /data showing its
// folder sub, and a tmpfs at /workspace/tmp.
func containerRoot(t *testing.T, ro bool, o Options) (*Root, string) {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	o.View = crossingView{mounts.Crossing{Name: "docker container web", Container: mounts.Table{
		{Source: dir, Destination: "/workspace", ReadOnly: ro},
		{Source: filepath.Join(dir, "sub"), Destination: "/data"},
		{Destination: "/workspace/tmp"},
	}}}
	root, err := NewWith(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root, dir
}

// An absolute path as the container sees it (/workspace/cmd/root.go) is
// the workdir's file, mapped back and then resolved and contained exactly
// as a relative path is: ".." and a symlink out of it are refused, and a
// path that only looks like it (/workspaces) is not taken for it. Issue
// 24 item 16: it was refused as "outside the working directory <host
// path>".
func TestContainerPathsMapIntoTheWorkdir(t *testing.T) {
	root, dir := containerRoot(t, false, Options{})
	outside := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "cmd"), 0o755)
	os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "cmd", "root.go"), []byte("package cmd\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "sub", "d.txt"), []byte("x"), 0o644)
	os.Symlink(outside, filepath.Join(dir, "escape"))
	os.Symlink("cmd", filepath.Join(dir, "inner"))
	for _, tc := range []struct{ in, want string }{
		{"/workspace/cmd/root.go", "cmd/root.go"},
		{"/workspace/./cmd/../cmd/root.go", "cmd/root.go"},
		{"/workspace", "."},
		{"/workspace/", "."},
		{"/workspace/new/file.go", "new/file.go"},
		{"/workspace/inner/root.go", "cmd/root.go"},
		{"/data/d.txt", "sub/d.txt"}, // another mount of part of the workdir
		{filepath.Join(dir, "cmd", "root.go"), "cmd/root.go"},
		{"cmd/root.go", "cmd/root.go"},
		{"/workspace/../etc/passwd", ""},
		{"/workspace/escape/secret", ""},
		{"/workspace/escape", ""},
		{"/workspaces/x.go", ""},
		{"/workspace/tmp/x", ""}, // the container's tmpfs, not the workdir's tmp
		{"/etc/passwd", ""},
		{"/", ""},
	} {
		checkResolve(t, root, root, tc.in, tc.want)
		checkResolve(t, root, root.Resolver(), tc.in, tc.want)
	}
	if _, st, err := root.ResolveStat("/workspace/cmd/root.go"); err != nil || st == nil || !st.Mode().IsRegular() {
		t.Errorf("ResolveStat(/workspace/cmd/root.go) = %v, %v: want the file's stat", st, err)
	}
	if b, err := root.ReadFile("/workspace/cmd/root.go"); err != nil || string(b) != "package cmd\n" {
		t.Errorf("ReadFile(/workspace/cmd/root.go) = %q, %v", b, err)
	}
}

// A refused path's error names the workdir as the container sees it and
// says to pass a path relative to it; the host's path, which the agent
// never saw, is not in it (nor where a symlink led, which is shown as the
// container sees it when it does).
func TestContainerPathErrorsNameTheWorkdirAsTheContainerSeesIt(t *testing.T) {
	root, dir := containerRoot(t, false, Options{})
	os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	os.Symlink("/etc", filepath.Join(dir, "etc"))
	for _, in := range []string{"/etc/passwd", "../x", "/workspace/../x", "/workspace/etc/passwd"} {
		_, err := root.Resolve(in)
		if !errors.Is(err, ErrOutside) {
			t.Fatalf("Resolve(%q) = %v, want ErrOutside", in, err)
		}
		msg := err.Error()
		if strings.Contains(msg, dir) || !strings.Contains(msg, "/workspace (as the container sees it)") || !strings.Contains(msg, "relative to it") {
			t.Errorf("Resolve(%q): %q: want the workdir as the container sees it (/workspace), a relative path suggested, and no host path", in, msg)
		}
	}
	if _, err := root.Resolve("/workspace/tmp/x"); !errors.Is(err, ErrOutside) || !strings.Contains(err.Error(), "a tmpfs") || strings.Contains(err.Error(), dir) {
		t.Errorf("Resolve(/workspace/tmp/x, under the container's tmpfs) = %v: want ErrOutside saying it is a tmpfs, without the host's path", err)
	}
	if got, want := root.Where(), "/workspace (the working directory as the container sees it)"; got != want {
		t.Errorf("Where() = %q, want %q", got, want)
	}
	if got := root.Show(filepath.Join(dir, "sub", "x.go")); got != "sub/x.go" {
		t.Errorf("Show(inside) = %q, want sub/x.go", got)
	}
}

// A program's output names the workdir as the container sees it
// ("Building /workspace/internal/demo"); shown, it is relative, as every
// other path is, and a path that only starts the same is left alone.
func TestRelativizeShowsWorkdirPathsRelative(t *testing.T) {
	root, dir := containerRoot(t, false, Options{})
	for in, want := range map[string]string{
		"Building /workspace/internal/demo":          "Building internal/demo",
		"cd /workspace && go build":                  "cd . && go build",
		"/workspace/main.go:12: undefined: x":        "main.go:12: undefined: x",
		"File \"/workspace/pyproj/main.py\", line 3": "File \"pyproj/main.py\", line 3",
		"/workspaces/other and /x/workspace/y stay":  "/workspaces/other and /x/workspace/y stay",
		"host " + dir + "/a.go too":                  "host a.go too",
		"nothing to change":                          "nothing to change",
	} {
		if got := root.Relativize(in); got != want {
			t.Errorf("Relativize(%q) = %q, want %q", in, got, want)
		}
	}
}

// A workdir the container mounts read-only is not written: the writer
// refuses the whole change, names the read-only mount and the setting
// that allows it, and every file keeps its content. With the setting
// (enclosure.write_read_only_mounts) it writes. Issue 24 item 5: lsp_rename,
// ast_edit and resolve wrote it anyway.
func TestReadOnlyMountIsNotWritten(t *testing.T) {
	for _, allow := range []bool{false, true} {
		root, dir := containerRoot(t, true, Options{WriteReadOnly: allow})
		os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
		a, b := filepath.Join(dir, "a.go"), filepath.Join(dir, "sub", "b.go") // b.go: /data is read-write
		os.WriteFile(a, []byte("a"), 0o644)
		os.WriteFile(b, []byte("b"), 0o644)
		err := (&Writer{}).Apply(root, []Change{
			{Path: a, Expected: Hash([]byte("a")), Content: []byte("A")},
			{Path: b, Expected: Hash([]byte("b")), Content: []byte("B")},
		})
		ga, _ := os.ReadFile(a)
		gb, _ := os.ReadFile(b)
		if allow {
			if err != nil || string(ga) != "A" || string(gb) != "B" {
				t.Errorf("with WriteReadOnly: Apply = %v, files %q %q; want both written", err, ga, gb)
			}
			continue
		}
		if !errors.Is(err, ErrReadOnly) || string(ga) != "a" || string(gb) != "b" {
			t.Fatalf("Apply on a read-only mount = %v, files %q %q; want ErrReadOnly and nothing written", err, ga, gb)
		}
		for _, want := range []string{"nothing was written", "a.go", "/workspace", "read-only", "enclosure.write_read_only_mounts"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Apply's error %q does not say %q", err, want)
			}
		}
		if err := root.CheckWritable(b); err != nil {
			t.Errorf("CheckWritable(sub/b.go) = %v: /data, which shows it, is read-write", err)
		}
	}
}
