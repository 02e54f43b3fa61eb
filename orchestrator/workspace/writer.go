package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Change replaces one file's content, provided it still has the content it
// had when the change was prepared.
type Change struct {
	Path     string // absolute, inside the root
	Expected string // Hash of the content the change was computed from
	Content  []byte // the new content
}

// ConflictError says which files changed since the change was prepared.
type ConflictError struct{ Paths []string }

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%d file(s) changed since the change was prepared, so nothing was written: %s; prepare the change again",
		len(e.Paths), strings.Join(e.Paths, ", "))
}

// Writer applies changes to several files all-or-nothing: it checks every
// file's expected hash first, writes each new content to a temporary file
// beside its target, then renames them over the targets; if any step
// fails it puts back every file it had already replaced. Every read,
// write and rename goes through the root's os.Root, so a folder swapped
// for a symlink out of the root part-way fails the change instead of
// writing outside. A replaced file keeps its mode, and its owner where
// the process may set it. A same-size change to a file stamped in the
// current second is written in the next (secondWait).
type Writer struct {
	// Rename, for tests only, replaces the rename of a temporary file
	// (oldpath, absolute) over its target (newpath, absolute), to inject
	// a failure part-way through; nil renames through the root.
	Rename func(oldpath, newpath string) error
	// Waited, for tests only, is told how long a change waited for the
	// next second (secondWait), when it did.
	Waited func(time.Duration)
}

// applyMu serialises Apply across every Writer.
var applyMu sync.Mutex

// original is what a file held before a change: to check it and to put
// it back.
type original struct {
	content  []byte
	mode     os.FileMode
	uid, gid int // -1: unknown
}

// Apply writes all changes or none.
func (w *Writer) Apply(root *Root, changes []Change) error {
	// One change at a time in this process: two changes to the same file
	// (two staged edits accepted at once, a rename beside them) must not
	// both pass the hash check before either writes.
	applyMu.Lock()
	defer applyMu.Unlock()
	rename := func(oldpath, newpath string) error {
		return root.rename(oldpath, newpath)
	}
	if w != nil && w.Rename != nil {
		rename = w.Rename
	}
	if len(changes) == 0 {
		return nil
	}
	sorted := append([]Change(nil), changes...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	for i := 1; i < len(sorted); i++ {
		if sorted[i].Path == sorted[i-1].Path {
			return fmt.Errorf("file %s appears twice in one change, so nothing was written: merge its edits into one change of that file", root.Rel(sorted[i].Path))
		}
	}

	// 0. Every file must be one the enclosure could write itself (a
	// read-only mount refuses the whole change).
	for _, c := range sorted {
		if err := root.CheckWritable(c.Path); err != nil {
			return fmt.Errorf("nothing was written: %w", err)
		}
	}

	// 1. Every file must still hold what the change was computed from.
	originals := make([]original, len(sorted))
	var conflicts []string
	var stamps []time.Time // the modification times of the files a change keeps the size of
	for i, c := range sorted {
		if _, err := root.name(c.Path); err != nil {
			return err
		}
		b, st, err := root.ReadRegular(c.Path, -1)
		if err != nil {
			conflicts = append(conflicts, root.Rel(c.Path)+" (unreadable: "+cause(err).Error()+")")
			continue
		}
		if Hash(b) != c.Expected {
			conflicts = append(conflicts, root.Rel(c.Path))
			continue
		}
		if int64(len(c.Content)) == st.Size() {
			stamps = append(stamps, st.ModTime())
		}
		originals[i] = original{content: b, mode: st.Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky), uid: -1, gid: -1}
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			originals[i].uid, originals[i].gid = int(sys.Uid), int(sys.Gid)
		}
	}
	if len(conflicts) > 0 {
		return &ConflictError{Paths: conflicts}
	}
	if d := secondWait(stamps, time.Now()); d > 0 {
		time.Sleep(d)
		if w != nil && w.Waited != nil {
			w.Waited(d)
		}
	}

	// 2. Write every new content beside its target.
	temps := make([]string, len(sorted))
	cleanup := func() {
		for _, t := range temps {
			if t != "" {
				root.remove(t)
			}
		}
	}
	for i, c := range sorted {
		t, err := root.writeTemp(c.Path, c.Content, originals[i])
		if err != nil {
			cleanup()
			return fmt.Errorf("nothing was written: %s: %w", root.Rel(c.Path), cause(err))
		}
		temps[i] = t
	}

	// 3. Rename them over the targets; on failure put back what was done.
	for i, c := range sorted {
		if err := rename(temps[i], c.Path); err != nil {
			cleanup()
			var lost []string
			for j := i - 1; j >= 0; j-- {
				if rerr := root.restore(sorted[j].Path, originals[j]); rerr != nil {
					lost = append(lost, root.Rel(sorted[j].Path))
				}
			}
			if len(lost) > 0 {
				return fmt.Errorf("writing %s failed (%v) and restoring %s failed too: check those files", root.Rel(c.Path), err, strings.Join(lost, ", "))
			}
			return fmt.Errorf("nothing was written: replacing %s failed: %w", root.Rel(c.Path), err)
		}
		temps[i] = ""
	}
	return nil
}

// secondWait is how long a change must wait, at now, so that each file
// whose size it keeps, stamped at stamps, gets a later modification
// second: until the second after the latest stamp in the current second
// (or in the one the kernel's coarse clock, which stamps files, may
// still be in), plus coarseTick; 0 when there is none (a stamp dated
// ahead of the clock is left out: a rewrite now differs from it). At
// most a second and coarseTick. Readers that compare a file's size and
// whole-second modification time take a same-size rewrite within the
// second for no change: clangd reads headers from disk and reuses a
// source's preamble after such a rewrite of a header it includes
// (clang's preamble check), so a C rename of equal length made in the
// second its header was last written was diagnosed against the old
// header ("implicit declaration of function 'stats_put'").
func secondWait(stamps []time.Time, now time.Time) time.Duration {
	var last int64 = -1
	for _, t := range stamps {
		if s := t.Unix(); (s == now.Unix() || s == now.Add(-coarseTick).Unix()) && s > last {
			last = s
		}
	}
	if last < 0 {
		return 0
	}
	return max(time.Unix(last+1, 0).Add(coarseTick).Sub(now), 0)
}

// coarseTick is more than the time by which the kernel's coarse clock,
// which stamps files, lags the clock a process reads (a tick: 4 ms at
// 250 Hz).
const coarseTick = 20 * time.Millisecond

// cause is the cause of an error about one file, the file being named
// already; other errors as they are.
func cause(err error) error {
	var fe *fileError
	if errors.As(err, &fe) {
		return fe.err
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// writeTemp writes content to a new temporary file beside target (both
// absolute, inside the root) with the original's mode and owner, and
// returns its absolute path.
func (r *Root) writeTemp(target string, content []byte, o original) (string, error) {
	name, err := r.name(target)
	if err != nil {
		return "", err
	}
	defer blocking()()
	var f *os.File
	var tmp string
	for range 100 {
		tmp = filepath.Join(filepath.Dir(name), "."+filepath.Base(name)+".berth-"+strconv.FormatUint(rand.Uint64(), 36))
		// O_EXCL: the root never follows a symlink to create a file.
		f, err = r.fs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return "", r.explain(target, err)
	}
	_, werr := f.Write(content)
	// Owner before mode: a chown clears the set-id bits. A process that
	// may not give the file away leaves it its own.
	if o.uid >= 0 {
		if err := f.Chown(o.uid, o.gid); err != nil && !errors.Is(err, fs.ErrPermission) {
			werr = errors.Join(werr, err)
		}
	}
	err = errors.Join(werr, f.Chmod(o.mode), f.Sync(), f.Close())
	if err != nil {
		r.fs.Remove(tmp)
		return "", err
	}
	return filepath.Join(r.dir, tmp), nil
}

// rename renames oldpath over newpath, both absolute inside the root,
// through the root.
func (r *Root) rename(oldpath, newpath string) error {
	from, err := r.name(oldpath)
	if err != nil {
		return err
	}
	to, err := r.name(newpath)
	if err != nil {
		return err
	}
	defer blocking()()
	if err := r.fs.Rename(from, to); err != nil {
		return r.explain(newpath, err)
	}
	return nil
}

// remove removes abs, inside the root, through the root.
func (r *Root) remove(abs string) {
	if name, err := r.name(abs); err == nil {
		defer blocking()()
		r.fs.Remove(name)
	}
}

// restore puts a file's original content back with a plain rename.
func (r *Root) restore(path string, o original) error {
	t, err := r.writeTemp(path, o.content, o)
	if err != nil {
		return err
	}
	if err := r.rename(t, path); err != nil {
		r.remove(t)
		return err
	}
	return nil
}
