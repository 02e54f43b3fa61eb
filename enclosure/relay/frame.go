package relay

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
)

// FrameWriter is the stdin of a program run with --stdin framed: each
// Write is one frame (a 4-byte big-endian length, then the bytes) and
// Close sends the empty frame that closes the program's stdin, while the
// stream to the relay stays open (its EOF would end the run).
type FrameWriter struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
}

// NewFrameWriter frames writes to w, the relay's stdin.
func NewFrameWriter(w io.Writer) *FrameWriter { return &FrameWriter{w: w} }

// maxFrame bounds one frame, so that a large write does not become a
// frame the relay must copy in one piece.
const maxFrame = 1 << 20

func (f *FrameWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, ErrClosed
	}
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), maxFrame)]
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], uint32(len(chunk)))
		// One writev on a connection; the lock keeps frames whole.
		bufs := net.Buffers{hdr[:], chunk}
		if _, err := bufs.WriteTo(f.w); err != nil {
			return n, err
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}

// Close closes the program's stdin. Safe to call more than once.
func (f *FrameWriter) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	_, err := f.w.Write([]byte{0, 0, 0, 0})
	return err
}
