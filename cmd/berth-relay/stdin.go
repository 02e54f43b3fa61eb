//go:build linux

package main

import (
	"encoding/binary"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/berth-dev/berth/enclosure/relay/wire"
)

// childInput is the write end of PROG's stdin. Once PROG stops reading
// (it closed its stdin or exited) or the relay closed it, writes are
// dropped: the relay goes on reading its own stdin, since only its EOF
// tells that the caller went away.
type childInput struct {
	f      *os.File
	closed atomic.Bool
	once   sync.Once
	mu     sync.Mutex // orders Close and dup
}

// dup is a copy of f while it is open (nil after Close, or without f),
// for a handover: the write end of PROG's stdin that Berth holds too.
// The caller closes it.
func (c *childInput) dup() *os.File {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f == nil || c.closed.Load() {
		return nil
	}
	fd, err := unix.FcntlInt(c.f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	return os.NewFile(uintptr(fd), "stdin")
}

func (c *childInput) Write(p []byte) (int, error) {
	if c.f != nil && !c.closed.Load() {
		if _, err := c.f.Write(p); err != nil {
			c.Close()
		}
	}
	return len(p), nil
}

// Close closes PROG's stdin, so PROG reads EOF. Safe to call more than
// once and while a Write is blocked (that Write then fails). Without f
// (PROG inherited the relay's stdin, or has a socket) there is nothing to
// close, and writes are dropped.
func (c *childInput) Close() error {
	c.once.Do(func() {
		c.closed.Store(true)
		if c.f != nil {
			c.mu.Lock()
			c.f.Close()
			c.mu.Unlock()
		}
	})
	return nil
}

// copyRaw passes src to PROG as it is, until src ends. (A PROG that never
// reads stdin and lets the pipe fill stalls the copy, and the relay then
// learns of EOF only when PROG reads again or exits.)
func (c *childInput) copyRaw(src io.Reader) {
	_, _ = io.Copy(c, src)
}

// copyFramed reads frames (a 4-byte big-endian length, then that many
// bytes) from src and passes their bytes to PROG; an empty frame closes
// PROG's stdin, and a signal frame (wire.SignalFrame|N) goes to sigs as if
// the relay had caught signal N, which spares the caller an exec of
// "signal" for each one. It returns when src ends, in a frame or between
// two.
func (c *childInput) copyFramed(src io.Reader, sigs chan<- os.Signal) {
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(src, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n&wire.SignalFrame != 0 {
			if sig := syscall.Signal(n & 0xff); forwarded(sig) {
				sigs <- sig
			}
			continue
		}
		if n == 0 {
			c.Close()
			continue
		}
		if _, err := io.CopyN(c, src, int64(n)); err != nil {
			return
		}
	}
}
