package workspace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/berth-dev/berth/internal/errclass"
)

// ErrNotRegular is wrapped by errors for a path that is not a regular
// file (a FIFO, a socket, a device, a folder where a file was wanted).
// A case of invalid.
var ErrNotRegular = errclass.Case("not a regular file", errclass.ErrInvalid)

// ErrTooLarge is wrapped by ReadRegular's error for a file over its limit.
// A case of invalid.
var ErrTooLarge = errclass.Case("file too large", errclass.ErrInvalid)

// fileWork bounds the file operations that may block in the kernel at
// once: an open, a read, a rename on a slow or stuck file system each
// holds an OS thread while it blocks, and enough of them at once end the
// process ("thread exhaustion"). Callers past the bound wait as
// goroutines, which cost no thread.
var fileWork = make(chan struct{}, 32)

// blocking takes a slot of fileWork; call the result to give it back. A
// holder never takes a second slot, so the bound cannot deadlock.
func blocking() (release func()) {
	fileWork <- struct{}{}
	return func() { <-fileWork }
}

// name is abs, a path lexically inside the root, relative to it for the
// os.Root ("." for the root itself).
func (r *Root) name(abs string) (string, error) {
	abs = filepath.Clean(abs)
	if !filepath.IsAbs(abs) || !r.contains(abs) {
		return "", fmt.Errorf("file %s is %w %s", abs, ErrOutside, r.dir)
	}
	if abs == r.dir {
		return ".", nil
	}
	return abs[len(r.dir)+1:], nil
}

// ReadFile reads the regular file at a path the model gave (as Resolve
// takes it). It refuses anything else by its kind ("x is a named pipe,
// not a regular file"), and never blocks on a FIFO.
func (r *Root) ReadFile(p string) ([]byte, error) {
	abs, err := r.Resolve(p)
	if err != nil {
		return nil, err
	}
	b, _, err := r.ReadRegular(abs, -1)
	return b, err
}

// ReadRegular reads the regular file at abs, a path inside the root, and
// returns what its open handle's fstat says of it. limit (when not
// negative) is the most bytes it reads: a larger file is an error
// wrapping ErrTooLarge. Any other kind of file is an error wrapping
// ErrNotRegular.
func (r *Root) ReadRegular(abs string, limit int64) ([]byte, fs.FileInfo, error) {
	name, err := r.name(abs)
	if err != nil {
		return nil, nil, err
	}
	defer blocking()()
	// O_NONBLOCK: opening a FIFO for reading returns at once instead of
	// waiting for a writer; the fstat of the handle then refuses it. A
	// stat before the open would tell nothing about what the open finds.
	f, err := r.fs.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, r.explain(abs, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, nil, NotRegular(r.Rel(abs), st.Mode())
	}
	if limit >= 0 && st.Size() > limit {
		return nil, st, fmt.Errorf("%s is %d bytes, over the %d-byte limit: %w", r.Rel(abs), st.Size(), limit, ErrTooLarge)
	}
	rd := io.Reader(f)
	if limit >= 0 {
		rd = io.LimitReader(f, limit+1) // a file growing while it is read
	}
	b, err := io.ReadAll(rd)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", r.Rel(abs), err)
	}
	if limit >= 0 && int64(len(b)) > limit {
		return nil, st, fmt.Errorf("%s grew past the %d-byte limit while it was read: %w", r.Rel(abs), limit, ErrTooLarge)
	}
	return b, st, nil
}

// Stat is os.Stat of abs, a path inside the root, through the root: a
// symlink is followed only while it stays inside.
func (r *Root) Stat(abs string) (fs.FileInfo, error) {
	name, err := r.name(abs)
	if err != nil {
		return nil, err
	}
	defer blocking()()
	st, err := r.fs.Stat(name)
	if err != nil {
		return nil, r.explain(abs, err)
	}
	return st, nil
}

// ReadDir lists the folder at abs, a path inside the root, through the
// root, sorted by name.
func (r *Root) ReadDir(abs string) ([]fs.DirEntry, error) {
	name, err := r.name(abs)
	if err != nil {
		return nil, err
	}
	defer blocking()()
	// O_DIRECTORY: whatever is there now must be a folder, never a FIFO
	// to wait on.
	f, err := r.fs.OpenFile(name, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, r.explain(abs, err)
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	sortEntries(entries)
	return entries, nil
}

func sortEntries(es []fs.DirEntry) {
	slices.SortFunc(es, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
}

// explain words an error of the os.Root for abs. The root refuses a path
// that leads out at the moment of use; Resolve, asked again, says how it
// leads out (a symlink swapped in since the path was checked). An open
// that fails on what is there (a socket cannot be opened) names its kind.
func (r *Root) explain(abs string, err error) error {
	if _, rerr := r.Resolve(abs); rerr != nil {
		return rerr
	}
	if errors.Is(err, syscall.ENXIO) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EOPNOTSUPP) {
		if name, nerr := r.name(abs); nerr == nil {
			if st, serr := r.fs.Lstat(name); serr == nil && !st.Mode().IsRegular() && !st.IsDir() {
				return NotRegular(r.Rel(abs), st.Mode())
			}
		}
	}
	var (
		pe *fs.PathError
		le *os.LinkError
	)
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case errors.As(err, &le):
		err = le.Err
	default:
		return err
	}
	// The os package's error for a path the root refused, which it does
	// not export; by now the path is back inside (Resolve passed it).
	if err.Error() == "path escapes from parent" {
		err = fmt.Errorf("it led %w while it was used (a symlink out of it was swapped in); try again", ErrOutside)
	}
	// Name the path as the model knows it, not the root's own name.
	return &fileError{rel: r.Rel(abs), err: err}
}

// fileError is an error about one file, named relative to the root.
type fileError struct {
	rel string
	err error
}

func (e *fileError) Error() string { return e.rel + ": " + e.err.Error() }
func (e *fileError) Unwrap() error { return e.err }

// NotRegular is the error for a path holding something other than a
// regular file (rel names it; m is its mode): "x is a named pipe, not a
// regular file: pass a source file". It wraps ErrNotRegular.
func NotRegular(rel string, m fs.FileMode) error {
	kind := "something other than a file"
	switch {
	case m&fs.ModeNamedPipe != 0:
		kind = "a named pipe"
	case m&fs.ModeSocket != 0:
		kind = "a socket"
	case m&fs.ModeCharDevice != 0:
		kind = "a character device"
	case m&fs.ModeDevice != 0:
		kind = "a block device"
	case m.IsDir():
		kind = "a folder"
	case m&fs.ModeSymlink != 0:
		kind = "a symlink"
	}
	return &notRegularError{rel: rel, kind: kind}
}

type notRegularError struct{ rel, kind string }

func (e *notRegularError) Error() string {
	return e.rel + " is " + e.kind + ", not a regular file: pass a source file"
}

func (e *notRegularError) Is(target error) bool { return target == ErrNotRegular }
