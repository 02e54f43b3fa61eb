package structural

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/berth-dev/berth/orchestrator"
)

// outsideDir is a folder beside the fixture's workdir, outside it.
func outsideDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		writeFile(t, filepath.Join(dir, name), content)
	}
	return dir
}

// rawCall calls a tool without the fixture's t (safe off the test's
// goroutine): the result, or the error as an error result.
func (f *fixture) rawCall(name string, args map[string]any) *orchestrator.Result {
	raw, _ := json.Marshal(args)
	res, err := f.reg.Call(context.Background(), f.run, orchestrator.SurfaceFull, name, raw)
	if err != nil {
		return orchestrator.Errorf("Go error: %v", err)
	}
	return res
}

// regexpEditID finds the edit id in ast_edit's proposal.
var regexpEditID = regexp.MustCompile(`"edit_\d+"`)

// swapLoop runs swap until the returned stop is called (or the test ends).
func swapLoop(t *testing.T, swap func(i int)) (stop func()) {
	var (
		done atomic.Bool
		wg   sync.WaitGroup
		once sync.Once
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !done.Load(); i++ {
			swap(i)
		}
	}()
	stop = func() { once.Do(func() { done.Store(true); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// linkTo is target as an absolute symlink, or a relative one from dir, by
// turns.
func linkTo(i int, dir, target string) string {
	if i%2 == 0 {
		return target
	}
	rel, err := filepath.Rel(dir, target)
	if err != nil {
		panic(err)
	}
	return rel
}

// swapDir moves dir away, puts a link to target in its place for a
// while, then puts it back for as long.
func swapDir(i int, dir, target string, pause time.Duration) {
	hold := filepath.Join(filepath.Dir(dir), ".hold-"+filepath.Base(dir))
	if os.Rename(dir, hold) != nil {
		return
	}
	os.Symlink(linkTo(i, filepath.Dir(dir), target), dir)
	time.Sleep(pause)
	os.Remove(dir)
	os.Rename(hold, dir)
	time.Sleep(pause)
}

// TestGrepNeverReadsOutsideThroughSwappedSymlinks: while a file, and a folder, of
// the workdir are swapped again and again for symlinks to outside files,
// ast_grep (on the file, and on the whole workspace) never returns a line
// of the outside files, and every call is answered.
//
// Issue 11 item 2.
func TestGrepNeverReadsOutsideThroughSwappedSymlinks(t *testing.T) {
	inside := "package p\n\nfunc Inside() {}\n"
	f := newFixture(t, DefaultConfig(), map[string]string{"f.go": inside, "sub/g.go": inside})
	out := outsideDir(t, map[string]string{"f.go": "package p\n\nfunc Escaped() {}\n", "g.go": "package p\n\nfunc Escaped() {}\n"})
	stop := swapLoop(t, func(i int) {
		link, fresh, target := filepath.Join(f.dir, ".link"), filepath.Join(f.dir, ".fresh"), filepath.Join(f.dir, "f.go")
		os.Symlink(linkTo(i, f.dir, filepath.Join(out, "f.go")), link)
		os.Rename(link, target)
		os.WriteFile(fresh, []byte(inside), 0o644)
		os.Rename(fresh, target)
		swapDir(i, filepath.Join(f.dir, "sub"), out, 0)
	})
	matched := 0
	for i := range 600 {
		args := map[string]any{"pattern": "func $F() {}", "path": "f.go"}
		if i%2 == 1 {
			args = map[string]any{"pattern": "func $F() {}", "language": "go"}
		}
		res := f.rawCall("ast_grep", args)
		text := res.FirstText()
		if strings.Contains(text, "Escaped") || strings.Contains(text, "Go error") {
			stop()
			t.Fatalf("call %d: %s", i, text)
		}
		if strings.Contains(text, "$F = Inside") {
			matched++
		}
	}
	stop()
	t.Logf("%d of 600 calls matched the inside file; none read outside", matched)
}

// TestResolveNeverWritesOutsideThroughSwappedSymlinks is the reproduction:
// ast_edit stages a change of sub/f.go; sub is then replaced by a symlink
// to an outside folder holding the same bytes; resolve accept must not
// rewrite the outside file. Then the same under a swap loop.
//
// Issue 11 item 2.
func TestResolveNeverWritesOutsideThroughSwappedSymlinks(t *testing.T) {
	const src = "package sub\n\nfunc f() {\n\tdone(1)\n}\n"
	f := newFixture(t, DefaultConfig(), map[string]string{"sub/f.go": src})
	out := outsideDir(t, map[string]string{"f.go": src})
	sub := filepath.Join(f.dir, "sub")

	f.ok("ast_edit", map[string]any{"pattern": "done($X)", "rewrite": "finish($X)", "path": "sub/f.go"})
	if err := os.Rename(sub, filepath.Join(f.dir, ".real-sub")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(out, sub); err != nil {
		t.Fatal(err)
	}
	text := f.fails("resolve", map[string]any{"edit_id": "edit_1", "action": "accept"}, `rejected and nothing was written`)
	if !strings.Contains(text, "outside the working directory") {
		t.Errorf("the refusal does not say the path leads outside: %s", text)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "f.go")); string(b) != src {
		t.Fatalf("resolve accept rewrote the outside file:\n%s", b)
	}
	os.Remove(sub)
	if err := os.Rename(filepath.Join(f.dir, ".real-sub"), sub); err != nil {
		t.Fatal(err)
	}

	// Under a swap loop: stage, accept, put the file back; never outside.
	stop := swapLoop(t, func(i int) { swapDir(i, sub, out, 200*time.Microsecond) })
	written, staged, calls := 0, 0, 0
	for ; calls < 5000 && staged < 60; calls++ {
		res := f.rawCall("ast_edit", map[string]any{"pattern": "done($X)", "rewrite": "finish($X)", "path": "sub/f.go"})
		id := regexpEditID.FindString(res.FirstText())
		if id == "" {
			continue // sub was a link to outside when it was read: refused
		}
		staged++
		res = f.rawCall("resolve", map[string]any{"edit_id": strings.Trim(id, `"`), "action": "accept"})
		if strings.Contains(res.FirstText(), "Go error") {
			stop()
			t.Fatal(res.FirstText())
		}
		if !res.IsError {
			written++
			os.WriteFile(filepath.Join(f.dir, ".back"), []byte(src), 0o644)
			os.Rename(filepath.Join(f.dir, ".back"), filepath.Join(f.dir, "sub", "f.go"))
		}
	}
	stop()
	t.Logf("%d of %d edits staged, %d of them written inside", staged, calls, written)
	if b, _ := os.ReadFile(filepath.Join(out, "f.go")); string(b) != src {
		t.Fatalf("the outside file was rewritten:\n%s", b)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 1 {
		t.Fatalf("files were created outside: %v", entries)
	}
}

// TestGrepOnAFIFOIsAnsweredAtOnce: a FIFO named as ast_grep's path
// is refused by its kind; one in a folder, and a file swapped for a FIFO
// while it is read, are skipped. 10,000 calls are each answered, and the
// process's OS threads stay bounded.
//
// Issue 11 item 3.
func TestGrepOnAFIFOIsAnsweredAtOnce(t *testing.T) {
	f := newFixture(t, DefaultConfig(), map[string]string{"a.go": goCall, "f.go": goCall})
	if err := syscall.Mkfifo(filepath.Join(f.dir, "pipe.go"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.fails("ast_grep", map[string]any{"pattern": "done($X)", "path": "pipe.go"}, `^pipe\.go is a named pipe, not a regular file: pass a source file$`)
	f.fails("ast_edit", map[string]any{"pattern": "done($X)", "rewrite": "x", "path": "pipe.go"}, `^pipe\.go is a named pipe, not a regular file`)
	if got := locations(f.call("ast_grep", map[string]any{"pattern": "done($X)", "language": "go"})); strings.Join(got, " ") != "a.go:4:2 f.go:4:2" {
		t.Errorf("a folder with a FIFO: matches %v", got)
	}

	stop := swapLoop(t, func(i int) {
		tmp := filepath.Join(f.dir, ".swap")
		if i%2 == 0 {
			syscall.Mkfifo(tmp, 0o644)
		} else {
			os.WriteFile(tmp, []byte(goCall), 0o644)
		}
		os.Rename(tmp, filepath.Join(f.dir, "f.go"))
	})
	before := osThreads()
	const calls, callers = 10000, 64
	var (
		wg          sync.WaitGroup
		next, wrong atomic.Int64
		peak        atomic.Int64
	)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > calls {
					return
				}
				args := map[string]any{"pattern": "done($X)", "path": "pipe.go"}
				switch i % 10 {
				case 1:
					args["path"] = "f.go" // a file or a FIFO, by turns
				case 2:
					args = map[string]any{"pattern": "done($X)", "language": "go"}
				}
				res := f.rawCall("ast_grep", args)
				if text := res.FirstText(); strings.Contains(text, "Go error") || args["path"] == "pipe.go" && !strings.Contains(text, "is a named pipe") {
					wrong.Add(1)
				}
				if i%100 == 0 {
					if n := int64(osThreads()); n > peak.Load() {
						peak.Store(n)
					}
				}
			}
		}()
	}
	wg.Wait()
	stop()
	t.Logf("OS threads before %d, peak %d over %d calls", before, peak.Load(), calls)
	if wrong.Load() > 0 {
		t.Errorf("%d calls answered wrongly", wrong.Load())
	}
	// Every caller may hold a thread in a parse (cgo) besides the bounded
	// file work; the FIFO used to hold one each for ever.
	if limit := int64(before + callers + 2*runtime.GOMAXPROCS(0) + 40); peak.Load() > limit {
		t.Errorf("OS threads grew from %d to %d (limit %d)", before, peak.Load(), limit)
	}
}

// osThreads is this process's OS thread count.
func osThreads() int {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// TestGrepInAFolderWithoutTheLanguageSaysSo: a folder with no file of the
// pattern's language says so, and what it holds, instead of "no matches".
//
// Issue 11 item 12b.
func TestGrepInAFolderWithoutTheLanguageSaysSo(t *testing.T) {
	f := newFixture(t, DefaultConfig(), map[string]string{"a.go": goCall, "sub/b.go": goCall, "sub/notes.md": "x", "Makefile": "x", ".hidden.py": "x"})
	f.fails("ast_grep", map[string]any{"pattern": "print($X)", "language": "python"},
		`^no files of language python under the workspace \(found: go \(\.go\): 2 files, \.md: 1 file, no extension: 1 file\): pass the language of the files you mean, or a path that holds python files$`)
	f.fails("ast_edit", map[string]any{"pattern": "print($X)", "rewrite": "log($X)", "language": "python", "path": "sub"},
		`^no files of language python under sub \(found: go \(\.go\): 1 file, \.md: 1 file\)`)
	// A language that has files, but no match, is still "no matches".
	text := f.ok("ast_grep", map[string]any{"pattern": "nothing($X)", "language": "go"})
	if !strings.HasPrefix(text, "no matches for go pattern") {
		t.Errorf("go without matches: %s", text)
	}
}

// TestPatternOfSeveralStatementsMatchesThemInARow: a pattern of several statements
// matches that many consecutive statements, in Python as in Go and
// TypeScript (Python used to say "no matches (parsed as class member)").
//
// Issue 11 item 12a.
func TestPatternOfSeveralStatementsMatchesThemInARow(t *testing.T) {
	f := newFixture(t, DefaultConfig(), map[string]string{
		"a.py": "total = 1 + 2\nprint(total)\n",
		"a.go": "package a\n\nfunc f() {\n\ttotal := 1 + 2\n\tfmt.Println(total)\n}\n",
		"a.ts": "const total = 1 + 2;\nconsole.log(total);\n",
	})
	for _, c := range []struct{ lang, pattern, at string }{
		{"python", "total = $E\nprint(total)", "a.py:1:1"},
		{"go", "total := $E\nfmt.Println(total)", "a.go:4:2"},
		{"typescript", "const total = $E;\nconsole.log(total);", "a.ts:1:1"},
	} {
		res := f.call("ast_grep", map[string]any{"pattern": c.pattern, "language": c.lang})
		text := res.FirstText()
		if res.IsError || !strings.HasPrefix(text, "1 match(es) in 1 file(s) for "+c.lang+" pattern (parsed as 2 statements in a row)") ||
			strings.Join(locations(res), " ") != c.at || !strings.Contains(text, "$E = 1 + 2") {
			t.Errorf("%s: %s", c.lang, text)
		}
	}
	f.ok("ast_edit", map[string]any{"pattern": "total = $E\nprint(total)", "rewrite": "print($E)", "path": "a.py"})
	f.ok("resolve", map[string]any{"edit_id": "edit_1", "action": "accept"})
	if got := f.read("a.py"); got != "print(1 + 2)\n" {
		t.Errorf("a.py after the rewrite: %q", got)
	}
}
