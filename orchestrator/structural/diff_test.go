package structural

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The preview must be a diff that patch(1) applies to give the new file:
// hunks far apart and close together, lines added and removed.
func TestUnifiedDiffAppliesWithPatch(t *testing.T) {
	var lines []string
	for i := 1; i <= 40; i++ {
		lines = append(lines, "line "+strings.Repeat("x", i%5))
	}
	src := []byte(strings.Join(lines, "\n") + "\n")
	off := func(line int) uint32 { return uint32(len(strings.Join(lines[:line-1], "\n")) + 1) }
	edits := []edit{
		{off(2), off(2) + 4, "LINE\nadded\nadded"}, // one line becomes three
		{off(6), off(8), ""},                       // two lines go
		{off(20), off(20) + 4, "twenty"},           // far away
		{off(40), off(40) + 4, "last\nline"},       // at the end
	}
	want := applyEdits(src, edits)
	diff := strings.Join(unifiedDiff("f.txt", src, edits), "\n") + "\n"

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("patch", "-p1", "--no-backup-if-mismatch")
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(diff)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("patch: %v\n%s\ndiff:\n%s", err, out, diff)
	}
	got, err := os.ReadFile(filepath.Join(dir, "f.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("patched file differs from the rewrite\ndiff:\n%s", diff)
	}
}
