package relay

import (
	"os"
	"path/filepath"
	"testing"
)

// A process in the container that swaps the socket's name for a symlink
// between the bind and the chmod gets nothing: the chmod refuses what is
// not a socket and never follows the link, and Close removes the link,
// not its target.
func TestStdioListenerNeverFollowsASwappedName(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	target := filepath.Join(outside, "secret")
	if err := os.WriteFile(target, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := ListenStdio(dir, NewTag())
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, s.Name)
	if err := os.Remove(name); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
	if err := s.chmod(); err == nil {
		t.Fatal("chmod of a symlink in the socket's place did not fail")
	}
	s.Close()
	fi, err := os.Stat(target)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the symlink's target: %v, %v; want it untouched (0600)", fi, err)
	}
	if _, err := os.Lstat(name); !os.IsNotExist(err) {
		t.Fatalf("the symlink is still there after Close: %v", err)
	}
}
