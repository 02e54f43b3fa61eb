package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestResolveKeepsPathsInside(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "a"), 0o755)
	os.WriteFile(filepath.Join(dir, "a", "f.txt"), []byte("x"), 0o644)
	os.Symlink(outside, filepath.Join(dir, "escape"))
	os.Symlink(filepath.Join(dir, "a"), filepath.Join(dir, "inner"))
	os.Symlink("../a", filepath.Join(dir, "a", "up"))                               // relative, inside
	os.Symlink(filepath.Join(outside, "nothing-yet"), filepath.Join(dir, "dangle")) // dangling, outside
	os.Symlink("inner/f.txt", filepath.Join(dir, "chain"))                          // a link to a link
	root, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	batch := root.Resolver()
	for _, tc := range []struct {
		in      string
		want    string // relative to the root, "" for an error
		outside bool
	}{
		{"a/f.txt", "a/f.txt", false},
		{"./a/../a/f.txt", "a/f.txt", false},
		{"new/file.go", "new/file.go", false},
		{"inner/f.txt", "a/f.txt", false},
		{filepath.Join(dir, "a", "f.txt"), "a/f.txt", false},
		{"", ".", false},
		{"../x", "", true},
		{"a/../../x", "", true},
		{"/etc/passwd", "", true},
		{"escape/secret", "", true},
		{"escape", "", true},
		{"escape/new/deeper.go", "", true},
		{"dangle", "", true},
		{"a/missing/x.go", "a/missing/x.go", false},
		{"a/up/f.txt", "a/f.txt", false},
		{"a/up/up/up/f.txt", "a/f.txt", false},
		{"chain", "a/f.txt", false},
		{"inner/new.go", "a/new.go", false},
	} {
		checkResolve(t, root, root, tc.in, tc.want)
		// One Resolver for every path in turn, as for the locations of one
		// answer: what it remembers of the folders never changes an answer.
		checkResolve(t, root, batch, tc.in, tc.want)
	}
}

// A Resolver remembers, across answers, what is at the end of a path
// only while the folder holding it is unchanged and was not changed just
// before the look (racy); a file swapped for a link out is seen at once.
func TestResolverRemembersFilesOnlyWhileTheirFolderIsUnchanged(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644)
	os.MkdirAll(filepath.Join(dir, "a"), 0o755)
	f := filepath.Join(dir, "a", "f.txt")
	os.WriteFile(f, []byte("x"), 0o644)
	root, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	remembered := func() bool {
		root.leaves.mu.Lock()
		defer root.leaves.mu.Unlock()
		_, ok := root.leaves.m[filepath.Join(root.Dir(), "a", "f.txt")]
		return ok
	}
	checkResolve(t, root, root.Resolver(), "a/f.txt", "a/f.txt")
	if remembered() {
		t.Fatal("remembered a file whose folder changed less than racyWindow ago")
	}
	time.Sleep(racyWindow + 100*time.Millisecond) // the folder ages past the window
	checkResolve(t, root, root.Resolver(), "a/f.txt", "a/f.txt")
	if !remembered() {
		t.Fatal("did not remember a file in an unchanged folder")
	}
	checkResolve(t, root, root.Resolver(), "a/f.txt", "a/f.txt")
	// The file becomes a link out: its folder's ctime changes.
	os.Remove(f)
	if err := os.Symlink(filepath.Join(outside, "secret"), f); err != nil {
		t.Fatal(err)
	}
	checkResolve(t, root, root.Resolver(), "a/f.txt", "")
	// Setting the folder's times back does not hide it: ctime moves on.
	old := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(dir, "a"), old, old)
	checkResolve(t, root, root.Resolver(), "a/f.txt", "")
}

// checkResolve asks r (a Root, or one Resolver for many paths) to resolve
// in, and wants want relative to root ("" for ErrOutside).
func checkResolve(t *testing.T, root *Root, r interface{ Resolve(string) (string, error) }, in, want string) {
	t.Helper()
	got, err := r.Resolve(in)
	if want == "" {
		if !errors.Is(err, ErrOutside) {
			t.Errorf("%T.Resolve(%q) = %q, %v; want ErrOutside", r, in, got, err)
		}
		return
	}
	if err != nil || root.Rel(got) != want {
		t.Errorf("%T.Resolve(%q) = %q, %v; want %q", r, in, root.Rel(got), err, want)
	}
}

func setup(t *testing.T, files map[string]string) (*Root, []Change) {
	t.Helper()
	dir := t.TempDir()
	root, _ := New(dir)
	var changes []Change
	for name, content := range files {
		p := filepath.Join(root.Dir(), name)
		if err := os.WriteFile(p, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
		changes = append(changes, Change{Path: p, Expected: Hash([]byte(content)), Content: []byte(strings.ToUpper(content))})
	}
	return root, changes
}

func contents(t *testing.T, root *Root) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, _ := os.ReadDir(root.Dir())
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(root.Dir(), e.Name()))
		out[e.Name()] = string(b)
	}
	return out
}

var three = map[string]string{"a.go": "alpha", "b.go": "beta", "c.go": "gamma"}

func TestApplyWritesAllAndKeepsMode(t *testing.T) {
	root, changes := setup(t, three)
	if err := (&Writer{}).Apply(root, changes); err != nil {
		t.Fatal(err)
	}
	got := contents(t, root)
	for name, c := range three {
		if got[name] != strings.ToUpper(c) {
			t.Errorf("%s = %q", name, got[name])
		}
	}
	if len(got) != 3 {
		t.Errorf("temporary files left: %v", got)
	}
	st, _ := os.Stat(filepath.Join(root.Dir(), "a.go"))
	if st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", st.Mode().Perm())
	}
}

func TestApplyRejectsWholeChangeOnConflict(t *testing.T) {
	root, changes := setup(t, three)
	os.WriteFile(filepath.Join(root.Dir(), "b.go"), []byte("edited by someone"), 0o644)
	err := (&Writer{}).Apply(root, changes)
	var ce *ConflictError
	if !errors.As(err, &ce) || len(ce.Paths) != 1 || ce.Paths[0] != "b.go" {
		t.Fatalf("Apply = %v, want a conflict naming b.go", err)
	}
	got := contents(t, root)
	if got["a.go"] != "alpha" || got["c.go"] != "gamma" || got["b.go"] != "edited by someone" {
		t.Fatalf("files changed: %v", got)
	}
}

func TestApplyRollsBackWhenARenameFails(t *testing.T) {
	for failAt := 1; failAt <= 3; failAt++ {
		root, changes := setup(t, three)
		calls := 0
		w := &Writer{Rename: func(oldpath, newpath string) error {
			calls++
			if calls == failAt {
				return errors.New("injected failure")
			}
			return os.Rename(oldpath, newpath)
		}}
		err := w.Apply(root, changes)
		if err == nil || !strings.Contains(err.Error(), "nothing was written") {
			t.Fatalf("failAt %d: Apply = %v", failAt, err)
		}
		got := contents(t, root)
		if len(got) != 3 {
			t.Fatalf("failAt %d: temporary files left: %v", failAt, got)
		}
		for name, c := range three {
			if got[name] != c {
				t.Errorf("failAt %d: %s = %q, want %q", failAt, name, got[name], c)
			}
		}
	}
}

func TestApplyRefusesPathsOutside(t *testing.T) {
	root, _ := setup(t, nil)
	err := (&Writer{}).Apply(root, []Change{{Path: "/tmp/x", Expected: Hash(nil)}})
	if !errors.Is(err, ErrOutside) {
		t.Fatalf("Apply outside = %v", err)
	}
}

func TestResolveRefusesNUL(t *testing.T) {
	root, _ := setup(t, nil)
	if _, err := root.Resolve("a\x00b"); err == nil || !strings.Contains(err.Error(), "NUL byte: pass a plain file path") {
		t.Fatalf("Resolve with a NUL = %v", err)
	}
}

func TestApplyRefusesAFileTwice(t *testing.T) {
	root, changes := setup(t, map[string]string{"a.go": "alpha"})
	err := (&Writer{}).Apply(root, append(changes, changes[0]))
	if err == nil || !strings.Contains(err.Error(), "appears twice") || !strings.Contains(err.Error(), "nothing was written") {
		t.Fatalf("Apply with a file twice = %v", err)
	}
	if got := contents(t, root); got["a.go"] != "alpha" || len(got) != 1 {
		t.Fatalf("files changed: %v", got)
	}
}

func TestApplyNamesAnUnreadableFile(t *testing.T) {
	root, changes := setup(t, map[string]string{"a.go": "alpha"})
	changes = append(changes, Change{Path: filepath.Join(root.Dir(), "gone.go"), Expected: Hash(nil), Content: []byte("x")})
	var ce *ConflictError
	if err := (&Writer{}).Apply(root, changes); !errors.As(err, &ce) || len(ce.Paths) != 1 || !strings.Contains(ce.Paths[0], "gone.go (unreadable: no such file or directory)") {
		t.Fatalf("Apply with a missing file = %v", err)
	}
	if got := contents(t, root); got["a.go"] != "alpha" || len(got) != 1 {
		t.Fatalf("files changed: %v", got)
	}
}

func TestConcurrentChangesToOneFileApplyOnce(t *testing.T) {
	root, changes := setup(t, map[string]string{"a.go": "alpha"})
	results := make(chan error, 8)
	for i := range 8 {
		c := changes[0]
		c.Content = []byte(strings.Repeat("x", i+1))
		go func() { results <- (&Writer{}).Apply(root, []Change{c}) }()
	}
	ok := 0
	for range 8 {
		if err := <-results; err == nil {
			ok++
		} else if _, conflict := err.(*ConflictError); !conflict {
			t.Fatalf("unexpected error %v", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d of 8 changes computed from the same content were applied, want 1", ok)
	}
}

// ResolveStat says what is at the resolved path, as os.Stat would.
func TestResolveStatSaysWhatIsThere(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "a"), 0o755)
	os.WriteFile(filepath.Join(dir, "a", "f.txt"), []byte("xyz"), 0o644)
	os.Symlink("a/f.txt", filepath.Join(dir, "link"))
	os.Symlink("a", filepath.Join(dir, "dirlink"))
	out := t.TempDir() // a link out of the root that leads back in
	os.Symlink(filepath.Join(dir, "a", "f.txt"), filepath.Join(out, "back"))
	os.Symlink(filepath.Join(out, "back"), filepath.Join(dir, "roundtrip"))
	root, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in    string
		isDir bool
		size  int64
		none  bool
	}{
		{in: "a/f.txt", size: 3},
		{in: "link", size: 3},
		{in: "dirlink/f.txt", size: 3},
		{in: "roundtrip", size: 3},
		{in: "a", isDir: true},
		{in: "dirlink", isDir: true},
		{in: ".", isDir: true},
		{in: "a/missing.txt", none: true},
		{in: "missing/deeper.txt", none: true},
	} {
		abs, st, err := root.ResolveStat(tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if tc.none {
			if st != nil {
				t.Errorf("%s: got a FileInfo for nothing", tc.in)
			}
			continue
		}
		want, err := os.Stat(abs)
		if err != nil || st == nil {
			t.Fatalf("%s: %v, %v", tc.in, st, err)
		}
		if st.IsDir() != tc.isDir || st.Mode() != want.Mode() || !tc.isDir && st.Size() != tc.size || !st.ModTime().Equal(want.ModTime()) {
			t.Errorf("%s: got %v %d %v, os.Stat says %v %d", tc.in, st.Mode(), st.Size(), st.ModTime(), want.Mode(), want.Size())
		}
	}
}

// Rel and Inside are the one "path relative to the workdir" every tool
// shows paths with: a name that merely starts with ".." is inside (the
// structural ignorer's copy took "..foo" for outside), dir itself is ".".
//
// Issue 12 item 4.
func TestRelAndInsideTakeDotDotNamesAsInside(t *testing.T) {
	for _, tc := range []struct {
		abs, want string
		inside    bool
	}{
		{"/w", ".", true},
		{"/w/a/b.go", "a/b.go", true},
		{"/w/..foo", "..foo", true},
		{"/", "/", false},
		{"/other/x", "/other/x", false},
		{"/wx/y", "/wx/y", false},
	} {
		rel, ok := Inside("/w", tc.abs)
		if ok != tc.inside || (ok && rel != tc.want) {
			t.Errorf("Inside(/w, %s) = %q, %v", tc.abs, rel, ok)
		}
		if got := Rel("/w", tc.abs); got != tc.want {
			t.Errorf("Rel(/w, %s) = %q, want %q", tc.abs, got, tc.want)
		}
	}
}

// What a Root remembers is bounded: past leavesMax paths it starts again.
func TestResolverLeavesAreBounded(t *testing.T) {
	folder, err := os.Lstat("/") // a folder unchanged for longer than racyWindow
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	st, err := os.Lstat(file)
	if err != nil {
		t.Fatal(err)
	}
	var l leaves
	for i := range leavesMax {
		l.put("/f"+strconv.Itoa(i), folder, st)
	}
	if len(l.m) != leavesMax {
		t.Fatalf("%d remembered, want %d", len(l.m), leavesMax)
	}
	l.put("/one-more", folder, st)
	if _, ok := l.get("/one-more", folder); !ok || len(l.m) != 1 {
		t.Fatalf("past the bound: %d remembered, the new one kept: %v; want it alone", len(l.m), ok)
	}
}

// TestApplyWritesAFileModifiedThisSecondInTheNext: a same-size change to
// a file last modified in the current second is written in a later
// second, so that readers comparing size and whole-second modification
// times (clang's preamble check in clangd) see it; a change to a file
// modified earlier, or one that changes its size, does not wait.
func TestApplyWritesAFileModifiedThisSecondInTheNext(t *testing.T) {
	apply := func(content string, stamp time.Time) (waited time.Duration, after time.Time) {
		t.Helper()
		root, changes := setup(t, map[string]string{"stats.h": "void stats_add(int v);\n"})
		changes[0].Content = []byte(content)
		if err := os.Chtimes(changes[0].Path, stamp, stamp); err != nil {
			t.Fatal(err)
		}
		w := &Writer{Waited: func(d time.Duration) { waited = d }}
		if err := w.Apply(root, changes); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(changes[0].Path)
		if err != nil {
			t.Fatal(err)
		}
		return waited, st.ModTime()
	}
	// Just after a second begins, so that the change would land in it.
	now := time.Now()
	time.Sleep(now.Truncate(time.Second).Add(time.Second + 30*time.Millisecond).Sub(now))
	stamp := time.Now()
	waited, after := apply("void stats_put(int v);\n", stamp)
	if after.Unix() == stamp.Unix() {
		t.Errorf("rewritten at the same size in the second it was last modified (%s): a whole-second reader sees no change", stamp.Format(time.RFC3339Nano))
	}
	if waited <= 0 || waited > time.Second+coarseTick {
		t.Errorf("waited %s, want more than 0 and at most a second and %s", waited, coarseTick)
	}
	if waited, _ := apply("void stats_put(int v);\n", time.Now().Add(-time.Minute)); waited != 0 {
		t.Errorf("a change to a file modified a minute ago waited %s", waited)
	}
	if waited, _ := apply("void stats_total(int v);\n", time.Now()); waited != 0 {
		t.Errorf("a change of size waited %s", waited)
	}
}

// TestSecondWaitIsUntilTheSecondAfterTheLatestStampOfThisSecond: the wait
// is until the next second (and coarseTick) for a stamp in the current
// second or, just after a second begins, in the one before (the kernel's
// coarse clock may still be there); none for an older stamp or one
// dated ahead of the clock.
func TestSecondWaitIsUntilTheSecondAfterTheLatestStampOfThisSecond(t *testing.T) {
	at := func(sec int64, ms int) time.Time { return time.Unix(sec, int64(ms)*int64(time.Millisecond)) }
	for _, tc := range []struct {
		name   string
		stamps []time.Time
		now    time.Time
		want   time.Duration
	}{
		{"none", nil, at(100, 500), 0},
		{"this second", []time.Time{at(100, 100)}, at(100, 500), 500*time.Millisecond + coarseTick},
		{"an older one beside it", []time.Time{at(99, 900), at(100, 100)}, at(100, 500), 500*time.Millisecond + coarseTick},
		{"an older second", []time.Time{at(99, 100)}, at(100, 500), 0},
		{"the second before, the coarse clock maybe still in it", []time.Time{at(99, 995)}, at(100, 5), coarseTick - 5*time.Millisecond},
		{"ahead of the clock", []time.Time{at(101, 0)}, at(100, 500), 0},
		{"ahead of the clock beside one of this second", []time.Time{at(105, 0), at(100, 100)}, at(100, 500), 500*time.Millisecond + coarseTick},
	} {
		if got := secondWait(tc.stamps, tc.now); got != tc.want {
			t.Errorf("%s: secondWait = %s, want %s", tc.name, got, tc.want)
		}
	}
}
