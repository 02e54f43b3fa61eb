package kernel

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-dev/berth/enclosure/host/hosttest"
)

// A kernel in an enclosure that sees the workdir at another path, as a
// container sees it at its mount, starts there: its working directory and
// the workdir's own interpreter (.venv) are given as that path, and a
// cell reads the workdir's files by relative paths (issue 13 item 4).
func TestKernelThroughAMappedWorkdir(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, ".venv", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(systemPython, filepath.Join(dir, ".venv", "bin", "python")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data.txt"), []byte("from the workdir"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := hosttest.NewMapped(t, dir)
	e := newEnvOn(t, testConfig(), nil, dir, m)
	checkResult(t, e.eval(`print(open("data.txt").read())`), false, []string{"from the workdir"}, nil)
	cmds := m.Cmds()
	if len(cmds) != 1 {
		t.Fatalf("started %d processes, want the kernel", len(cmds))
	}
	if c := cmds[0]; c.Dir != m.View || c.Path != filepath.Join(m.View, ".venv", "bin", "python") {
		t.Errorf("the kernel was started as %s in %s, want %s/.venv/bin/python in %s", c.Path, c.Dir, m.View, m.View)
	}
}
