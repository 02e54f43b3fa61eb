package relay

import (
	"io"
	"os"
	"sync"
)

// MergeStderr makes one stderr of a held program's and its relay's own
// (the relay's failures, before the program started): both are copied
// into dst when given, whole writes at a time, else into one pipe whose
// read end r it returns. Each source is closed at its end. wait waits
// for the copies, as exec.Cmd's Wait does for a Stderr that is no file.
func MergeStderr(dst io.Writer, sources ...io.ReadCloser) (r io.Reader, wait func()) {
	var copies sync.WaitGroup
	var out io.Writer
	if dst != nil {
		out = LockedWriter(dst)
	} else {
		pr, pw, err := os.Pipe()
		if err != nil {
			out = io.Discard
		} else {
			r, out = eofCloser{pr}, LockedWriter(pw)
			defer func() { go func() { copies.Wait(); pw.Close() }() }()
		}
	}
	for _, src := range sources {
		if src == nil {
			continue
		}
		copies.Go(func() {
			_, _ = io.Copy(out, src)
			src.Close()
		})
	}
	return r, copies.Wait
}

// LockedWriter serialises writes to w, so that two copies into it keep
// each write whole. One already locked is returned as it is.
func LockedWriter(w io.Writer) io.Writer {
	if l, ok := w.(*lockedWriter); ok {
		return l
	}
	return &lockedWriter{w: w}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
