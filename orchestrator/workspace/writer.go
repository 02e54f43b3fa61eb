package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
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
// fails it puts back every file it had already replaced.
type Writer struct {
	// Rename replaces newpath with oldpath; nil means os.Rename. Tests set
	// it to inject a failure part-way through.
	Rename func(oldpath, newpath string) error
}

// applyMu serialises Apply across every Writer.
var applyMu sync.Mutex

// Apply writes all changes or none. root only names files in errors.
func (w *Writer) Apply(root *Root, changes []Change) error {
	// One change at a time in this process: two changes to the same file
	// (two staged edits accepted at once, a rename beside them) must not
	// both pass the hash check before either writes.
	applyMu.Lock()
	defer applyMu.Unlock()
	rename := os.Rename
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

	// 1. Every file must still hold what the change was computed from.
	originals := make([][]byte, len(sorted))
	modes := make([]os.FileMode, len(sorted))
	var conflicts []string
	for i, c := range sorted {
		if !root.contains(c.Path) {
			return fmt.Errorf("file %s is %w", c.Path, ErrOutside)
		}
		b, err := os.ReadFile(c.Path)
		if err != nil {
			why := err
			if inner := errors.Unwrap(err); inner != nil {
				why = inner // the *PathError's cause; the path is already named
			}
			conflicts = append(conflicts, root.Rel(c.Path)+" (unreadable: "+why.Error()+")")
			continue
		}
		if Hash(b) != c.Expected {
			conflicts = append(conflicts, root.Rel(c.Path))
			continue
		}
		st, err := os.Stat(c.Path)
		if err != nil {
			return err
		}
		originals[i], modes[i] = b, st.Mode().Perm()
	}
	if len(conflicts) > 0 {
		return &ConflictError{Paths: conflicts}
	}

	// 2. Write every new content beside its target.
	temps := make([]string, len(sorted))
	cleanup := func() {
		for _, t := range temps {
			if t != "" {
				os.Remove(t)
			}
		}
	}
	for i, c := range sorted {
		t, err := writeTemp(c.Path, c.Content, modes[i])
		if err != nil {
			cleanup()
			return fmt.Errorf("nothing was written: %s: %w", root.Rel(c.Path), err)
		}
		temps[i] = t
	}

	// 3. Rename them over the targets; on failure put back what was done.
	for i, c := range sorted {
		if err := rename(temps[i], c.Path); err != nil {
			cleanup()
			var lost []string
			for j := i - 1; j >= 0; j-- {
				if rerr := restore(sorted[j].Path, originals[j], modes[j]); rerr != nil {
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

func writeTemp(target string, content []byte, mode os.FileMode) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".berth-*")
	if err != nil {
		return "", err
	}
	name := f.Name()
	_, werr := f.Write(content)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr, os.Chmod(name, mode)); err != nil {
		os.Remove(name)
		return "", err
	}
	return name, nil
}

// restore puts a file's original content back with a plain rename.
func restore(path string, content []byte, mode os.FileMode) error {
	t, err := writeTemp(path, content, mode)
	if err != nil {
		return err
	}
	if err := os.Rename(t, path); err != nil {
		os.Remove(t)
		return err
	}
	return nil
}
