// Package workspace keeps tools inside a run's working directory: it
// resolves the paths a model passes (refusing any that escape, through
// "..", an absolute path or a symlink), reads files, and writes changes to
// several files all-or-nothing.
//
// Resolve checks a path and says why it is refused; the reads and writes
// themselves go through an os.Root opened on the directory, which refuses
// at every component, at the moment of use, any path that leaves it, so a
// folder swapped for a symlink between the check and the use cannot lead
// out. Only regular files are read or written, opened without blocking
// (a FIFO never hangs a call), and the file work that can block in the
// kernel is bounded, so no input can exhaust the process's threads.
//
// It must never read or write a file outside the root, nor leave a
// multi-file change half-applied.
package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/berth-dev/berth/internal/errclass"
)

// ErrOutside is wrapped by errors for paths that leave the root: a case
// of invalid (the request names a path it may not).
var ErrOutside = errclass.Case("outside the working directory", errclass.ErrInvalid)

// Root is a working directory.
type Root struct {
	dir    string   // absolute, cleaned, symlinks resolved
	fs     *os.Root // opened on dir: every read and write goes through it
	leaves leaves   // what Resolvers found at the ends of paths
	opts   Options  // the run's enclosure (NewWith)
	// seen is the workdir as the enclosure sees it; "" when that is dir
	// (the host).
	seen string
}

// New returns the root for dir, which must exist. Close it when done
// (a run's root is closed when the run ends).
func New(dir string) (*Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("working directory %s: %w", dir, err)
	}
	fsr, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("working directory %s: %w", dir, err)
	}
	return &Root{dir: real, fs: fsr}, nil
}

// Close releases the root's handle on the directory; reads and writes
// through it fail afterwards.
func (r *Root) Close() error { return r.fs.Close() }

// Dir is the root's absolute path.
func (r *Root) Dir() string { return r.dir }

// Resolve turns a path the model gave (relative to the root, or absolute)
// into an absolute path inside the root. The path need not exist; the part
// of it that does is resolved through symlinks, and must stay inside.
func (r *Root) Resolve(p string) (string, error) {
	abs, _, err := r.ResolveStat(p)
	return abs, err
}

// ResolveStat is Resolve that also says what is at the path: its
// os.Lstat (never a symlink: those are followed), or nil when nothing is
// there. The walk looked at it already; a caller that needs it would
// otherwise look it up again.
func (r *Root) ResolveStat(p string) (string, fs.FileInfo, error) {
	return r.resolveStat(p, os.Lstat)
}

// Resolver resolves the many paths of one answer (a language server's
// locations): it remembers what each component of a path is, so the
// folders those paths share are looked at once rather than once per path.
// Keep one for a single answer: a link may change between answers.
//
// Across answers, the Root remembers what is at the end of a path (a file,
// not a link) for as long as the folder holding it is unchanged: the
// folders are looked at again in every answer, the files in them only
// when their folder changed. A Resolver's answers are for showing; every
// read and write still goes through the Root's os.Root, which refuses a
// path that leads out at the moment of use.
type Resolver struct {
	r    *Root
	seen map[string]lstatAnswer
}

type lstatAnswer struct {
	st  fs.FileInfo
	err error
}

// Resolver returns a Resolver for one batch of paths.
func (r *Root) Resolver() *Resolver { return &Resolver{r: r, seen: map[string]lstatAnswer{}} }

// Resolve is Root.Resolve, remembering each component's Lstat.
func (v *Resolver) Resolve(p string) (string, error) {
	abs, _, err := v.r.resolveStat(p, v.lstat)
	return abs, err
}

func (v *Resolver) lstat(path string) (fs.FileInfo, error) {
	if a, ok := v.seen[path]; ok {
		return a.st, a.err
	}
	// The walk goes down from the root, so the folder is the root or a
	// component looked at already.
	folder := v.folder(filepath.Dir(path))
	if st, ok := v.r.leaves.get(path, folder); ok {
		v.seen[path] = lstatAnswer{st: st}
		return st, nil
	}
	st, err := os.Lstat(path)
	v.seen[path] = lstatAnswer{st, err}
	if err == nil {
		v.r.leaves.put(path, folder, st)
	}
	return st, err
}

// folder is dir's Lstat in this answer (nil when it failed).
func (v *Resolver) folder(dir string) fs.FileInfo {
	a, ok := v.seen[dir]
	if !ok {
		a.st, a.err = os.Lstat(dir)
		v.seen[dir] = a
	}
	return a.st
}

// leaves remembers, across answers, the Lstat of paths that are neither
// a folder nor a link, with the identity of the folder holding them when
// they were looked at. Replacing, renaming or removing an entry changes
// its folder's ctime (which, unlike the mtime, no one can set back), so
// while the folder has the same inode and ctime the entry is the same.
// A folder whose ctime is within racyWindow of the look is not trusted,
// as git treats racily clean files: a file system's clock is coarse, and
// a second change in the same tick would keep the time.
type leaves struct {
	mu sync.Mutex
	m  map[string]leaf
}

type leaf struct {
	st     fs.FileInfo
	folder folderID
}

// folderID is what a folder's change changes.
type folderID struct {
	dev, ino uint64
	ctime    time.Time
}

// racyWindow is how long after a folder's change its entries are not
// remembered: more than any file system's timestamp granularity.
const racyWindow = time.Second

// leavesMax bounds what a Root remembers; past it, it starts again.
const leavesMax = 1 << 16

func idOf(st fs.FileInfo) (folderID, bool) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || !st.IsDir() {
		return folderID{}, false
	}
	return folderID{dev: uint64(sys.Dev), ino: sys.Ino, ctime: time.Unix(sys.Ctim.Unix())}, true
}

func (l *leaves) get(path string, folder fs.FileInfo) (fs.FileInfo, bool) {
	if folder == nil {
		return nil, false
	}
	id, ok := idOf(folder)
	if !ok {
		return nil, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.m[path]
	if !ok || e.folder != id {
		return nil, false
	}
	return e.st, true
}

func (l *leaves) put(path string, folder, st fs.FileInfo) {
	if folder == nil || st.IsDir() || st.Mode()&os.ModeSymlink != 0 {
		return
	}
	id, ok := idOf(folder)
	if !ok || time.Since(id.ctime) < racyWindow {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil || len(l.m) >= leavesMax {
		l.m = map[string]leaf{}
	}
	l.m[path] = leaf{st: st, folder: id}
}

func (r *Root) resolveStat(p string, lstat func(string) (fs.FileInfo, error)) (string, fs.FileInfo, error) {
	if strings.ContainsRune(p, 0) {
		return "", nil, fmt.Errorf("path %q contains a NUL byte: pass a plain file path", p)
	}
	var abs string // "" and "." are the root itself
	if filepath.IsAbs(p) {
		abs = filepath.Clean(p)
		// An absolute path as the enclosure sees it (/workspace/x.go):
		// the host's path it maps to, contained from here on exactly as
		// a relative path is. A host path inside the root is taken as it
		// is.
		if !r.contains(abs) {
			h, ok, why := r.fromView(abs)
			if why != nil {
				return "", nil, r.hidden(p, why)
			}
			if ok {
				abs = h
			}
		}
	} else {
		abs = filepath.Join(r.dir, p)
	}
	if !r.contains(abs) {
		return "", nil, r.outside(p, "")
	}
	real, st, err := r.resolveBelow(abs, lstat)
	if err != nil {
		return "", nil, fmt.Errorf("path %q: %w", p, err)
	}
	if !r.contains(real) {
		return "", nil, r.outside(p, real)
	}
	return real, st, nil
}

// Rel is abs relative to the root, with forward slashes; a path outside
// the root is returned unchanged.
func (r *Root) Rel(abs string) string { return Rel(r.dir, abs) }

// Rel is abs relative to dir with forward slashes ("." for dir itself),
// as every answer shows a path; a path outside dir is returned unchanged.
// It is lexical: abs and dir are clean, resolved paths.
func Rel(dir, abs string) string {
	if rel, ok := Inside(dir, abs); ok {
		return rel
	}
	return abs
}

// Inside is abs relative to dir with forward slashes, and whether abs is
// dir or below it (lexically).
func Inside(dir, abs string) (string, bool) {
	rel, err := filepath.Rel(dir, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	return filepath.ToSlash(rel), true
}

// Contains says whether an absolute path is lexically inside the root.
func (r *Root) contains(abs string) bool {
	return abs == r.dir || strings.HasPrefix(abs, r.dir+string(filepath.Separator))
}

// resolveBelow resolves abs, a clean path inside the root. The root is
// already resolved, so only the components below it are looked at, one
// Lstat each: when none is a symlink abs is its own answer (half the
// lookups of resolving the whole path). A symlink is followed by its
// target, even when nothing is there yet (a dangling link out of the root
// must not pass for a new file inside it); a path that leaves the root is
// resolved the thorough way, for the caller to refuse. A component that
// does not exist ends the walk: the rest does not exist either.
func (r *Root) resolveBelow(abs string, lstat func(string) (fs.FileInfo, error)) (string, fs.FileInfo, error) {
	for hops := 0; ; hops++ {
		if hops > 40 {
			return "", nil, fmt.Errorf("too many levels of symlinks")
		}
		if !r.contains(abs) {
			// Through a link outside: refused by the caller unless it
			// comes back inside, and then this is what is there.
			real, err := resolveExisting(abs)
			if err != nil || !r.contains(real) {
				return real, nil, err
			}
			return real, statOrNil(real), nil
		}
		link, target, st, err := r.firstSymlink(abs, lstat)
		if err != nil || link == "" {
			return abs, st, err
		}
		abs = filepath.Join(target, strings.TrimPrefix(abs, link))
	}
}

// firstSymlink walks abs's components below the root and returns the
// first that is a symlink, with its target as an absolute path; "" when
// there is none before the path ends (then st is the last component's
// Lstat) or stops existing (st nil).
func (r *Root) firstSymlink(abs string, lstat func(string) (fs.FileInfo, error)) (link, target string, st fs.FileInfo, err error) {
	if abs == r.dir {
		return "", "", statOrNil(r.dir), nil
	}
	cur, rest := r.dir, abs[len(r.dir)+1:]
	for rest != "" {
		var name string
		name, rest, _ = strings.Cut(rest, string(filepath.Separator))
		cur = filepath.Join(cur, name)
		st, err = lstat(cur)
		if errors.Is(err, os.ErrNotExist) {
			return "", "", nil, nil
		}
		if err != nil {
			return "", "", nil, err
		}
		if st.Mode()&os.ModeSymlink == 0 {
			continue
		}
		t, err := os.Readlink(cur)
		if err != nil {
			return "", "", nil, err
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(filepath.Dir(cur), t)
		}
		return cur, filepath.Clean(t), nil, nil
	}
	return "", "", st, nil
}

// statOrNil is os.Stat, nil when it fails: "nothing usable there".
func statOrNil(path string) fs.FileInfo {
	st, err := os.Stat(path)
	if err != nil {
		return nil
	}
	return st
}

// resolveExisting resolves symlinks in the longest existing prefix of abs
// and appends the rest.
func resolveExisting(abs string) (string, error) {
	rest := ""
	cur := abs
	for {
		real, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// Hash is the content hash recorded when a change is staged.
func Hash(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
