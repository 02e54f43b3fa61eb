package workspace

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// hostile is a workdir and a folder outside it.
type hostile struct {
	root    *Root
	wd, out string
}

func newHostile(t *testing.T) *hostile {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := &hostile{wd: filepath.Join(base, "wd"), out: filepath.Join(base, "outside")}
	for _, d := range []string{h.wd, h.out} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h.root, err = New(h.wd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.root.Close() })
	return h
}

func (h *hostile) write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// swapper runs swap in a loop until the test's body is done.
func swapper(t *testing.T, swap func(i int)) (stop func()) {
	var (
		done atomic.Bool
		wg   sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !done.Load(); i++ {
			swap(i)
		}
	}()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			done.Store(true)
			wg.Wait()
		}
	}
	t.Cleanup(stop)
	return stop
}

// outsideLink is a link to the outside folder, absolute or relative by
// turns: the root must refuse both.
func (h *hostile) outsideLink(i int, target string) string {
	if i%2 == 0 {
		return target
	}
	rel, err := filepath.Rel(h.wd, target)
	if err != nil {
		panic(err)
	}
	return rel
}

// TestWriteNeverFollowsASwappedFolder: a change computed for
// wd/sub/f.go is applied while wd/sub is swapped again and again for a
// symlink to an outside folder holding the same bytes. The outside file
// is never written, nor anything created beside it.
//
// Issue 11 item 2.
func TestWriteNeverFollowsASwappedFolder(t *testing.T) {
	h := newHostile(t)
	const orig = "package sub\n\nfunc F() {}\n"
	target := filepath.Join(h.wd, "sub", "f.go")
	h.write(t, target, orig)
	h.write(t, filepath.Join(h.out, "f.go"), orig)
	hold := filepath.Join(h.wd, ".hold")
	stop := swapper(t, func(i int) {
		sub := filepath.Join(h.wd, "sub")
		if os.Rename(sub, hold) != nil {
			return
		}
		os.Symlink(h.outsideLink(i, h.out), sub)
		runtime.Gosched()
		os.Remove(sub)
		os.Rename(hold, sub)
		runtime.Gosched()
	})
	cur, ok, refused := orig, 0, 0
	seen := map[string]bool{}
	for i := range 2000 {
		next := orig + "// " + strconv.Itoa(i) + "\n"
		err := (&Writer{}).Apply(h.root, []Change{{Path: target, Expected: Hash([]byte(cur)), Content: []byte(next)}})
		if err == nil {
			cur = next
			ok++
		} else {
			msg := strings.ReplaceAll(err.Error(), h.wd, "WD")
			if !seen[msg] {
				seen[msg] = true
				t.Log(msg)
			}
			refused++
		}
	}
	stop()
	t.Logf("%d changes written inside, %d refused while the folder was swapped", ok, refused)
	if b, _ := os.ReadFile(filepath.Join(h.out, "f.go")); string(b) != orig {
		t.Fatalf("the outside file was written:\n%s", b)
	}
	if entries, _ := os.ReadDir(h.out); len(entries) != 1 {
		t.Fatalf("files were created outside: %v", entries)
	}
	// With the folder back in place the same change goes through.
	if err := (&Writer{}).Apply(h.root, []Change{{Path: target, Expected: Hash([]byte(cur)), Content: []byte("package sub\n")}}); err != nil {
		t.Fatalf("after the swaps: %v", err)
	}
}

// TestReadNeverFollowsASwappedFile: a file, and the folder
// holding another, are swapped again and again for symlinks to outside
// files while they are read; no read ever returns an outside byte.
//
// Issue 11 item 2.
func TestReadNeverFollowsASwappedFile(t *testing.T) {
	h := newHostile(t)
	const inside, outside = "package p // INSIDE\n", "package p // OUTSIDE\n"
	h.write(t, filepath.Join(h.wd, "f.go"), inside)
	h.write(t, filepath.Join(h.wd, "sub", "g.go"), inside)
	h.write(t, filepath.Join(h.out, "f.go"), outside)
	h.write(t, filepath.Join(h.out, "g.go"), outside)
	stop := swapper(t, func(i int) {
		// The file: a link renamed over it, then a regular file again.
		link, fresh := filepath.Join(h.wd, ".link"), filepath.Join(h.wd, ".fresh")
		os.Symlink(h.outsideLink(i, filepath.Join(h.out, "f.go")), link)
		os.Rename(link, filepath.Join(h.wd, "f.go"))
		os.WriteFile(fresh, []byte(inside), 0o644)
		os.Rename(fresh, filepath.Join(h.wd, "f.go"))
		// The folder: moved away, a link to outside in its place, back.
		sub, hold := filepath.Join(h.wd, "sub"), filepath.Join(h.wd, ".hold")
		if os.Rename(sub, hold) == nil {
			os.Symlink(h.outsideLink(i, h.out), sub)
			runtime.Gosched()
			os.Remove(sub)
			os.Rename(hold, sub)
		}
	})
	read, refused := 0, 0
	for range 3000 {
		for _, p := range []string{"f.go", "sub/g.go"} {
			b, err := h.root.ReadFile(p)
			if bytes.Contains(b, []byte("OUTSIDE")) {
				t.Fatalf("ReadFile(%s) returned the outside file", p)
			}
			if err != nil {
				refused++
			} else {
				read++
			}
		}
	}
	stop()
	t.Logf("%d reads inside, %d refused while swapped", read, refused)
}

// TestFIFOAndSocketAreRefused: a named pipe or a socket
// where a file is expected is refused by its kind, at once.
//
// Issue 11 item 3.
func TestFIFOAndSocketAreRefused(t *testing.T) {
	h := newHostile(t)
	if err := syscall.Mkfifo(filepath.Join(h.wd, "pipe.go"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(h.wd, "sock.go"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, tc := range []struct{ path, want string }{
		{"pipe.go", "pipe.go is a named pipe, not a regular file: pass a source file"},
		{"sock.go", "sock.go is a socket, not a regular file: pass a source file"},
		{".", ". is a folder, not a regular file: pass a source file"},
	} {
		_, err := h.root.ReadFile(tc.path)
		if !errors.Is(err, ErrNotRegular) || err.Error() != tc.want {
			t.Errorf("ReadFile(%s) = %v, want %q", tc.path, err, tc.want)
		}
	}
	// A change to a FIFO is refused as a whole, naming it.
	err = (&Writer{}).Apply(h.root, []Change{{Path: filepath.Join(h.wd, "pipe.go"), Expected: Hash(nil), Content: []byte("x")}})
	var ce *ConflictError
	if !errors.As(err, &ce) || !strings.Contains(ce.Error(), "pipe.go (unreadable: pipe.go is a named pipe") {
		t.Fatalf("Apply to a FIFO = %v", err)
	}
	if _, err := h.root.ReadDir(filepath.Join(h.wd, "pipe.go")); err == nil {
		t.Fatal("ReadDir of a FIFO succeeded")
	}
}

// TestManyFIFOReadsKeepThreadsBounded: 10,000 reads of a
// FIFO at once are each answered with the error, and the process's OS
// threads stay bounded (each used to block a thread in open for ever,
// and 10,000 of them ended the process with "thread exhaustion").
//
// Issue 11 item 3.
func TestManyFIFOReadsKeepThreadsBounded(t *testing.T) {
	h := newHostile(t)
	if err := syscall.Mkfifo(filepath.Join(h.wd, "pipe.go"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A regular file swapped for the FIFO while it is read: never a hang.
	h.write(t, filepath.Join(h.wd, "f.go"), "package p\n")
	stop := swapper(t, func(i int) {
		tmp := filepath.Join(h.wd, ".swap")
		if i%2 == 0 {
			syscall.Mkfifo(tmp, 0o644)
		} else {
			os.WriteFile(tmp, []byte("package p\n"), 0o644)
		}
		os.Rename(tmp, filepath.Join(h.wd, "f.go"))
	})
	before := threads()
	if before == 0 {
		t.Fatal("no thread count in /proc/self/status")
	}
	const calls = 10000
	var (
		wg             sync.WaitGroup
		peak           atomic.Int64
		refused, wrong atomic.Int64
	)
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := "pipe.go"
			if i%10 == 0 {
				p = "f.go"
			}
			_, err := h.root.ReadFile(p)
			switch {
			case errors.Is(err, ErrNotRegular):
				refused.Add(1)
			case err != nil || p == "pipe.go":
				wrong.Add(1)
			}
			if i%100 == 0 {
				if n := int64(threads()); n > peak.Load() {
					peak.Store(n)
				}
			}
		}()
	}
	wg.Wait()
	stop()
	t.Logf("threads before %d, peak %d; %d of %d calls refused", before, peak.Load(), refused.Load(), calls)
	if refused.Load() < calls*9/10 || wrong.Load() > 0 {
		t.Errorf("%d calls refused, %d answered wrongly", refused.Load(), wrong.Load())
	}
	if peak.Load() > int64(before+cap(fileWork)+runtime.GOMAXPROCS(0)+16) {
		t.Errorf("OS threads grew from %d to %d", before, peak.Load())
	}
}

// threads is this process's OS thread count, 0 if /proc says nothing.
func threads() int {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}
