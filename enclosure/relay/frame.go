package relay

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-dev/berth/enclosure/relay/wire"
	"github.com/berth-dev/berth/internal/errclass"
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

func (f *FrameWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, ErrClosed
	}
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), wire.MaxFrame)]
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

// Signal has the relay act on sig as if it had caught it: SIGINT goes to
// the program's group; SIGTERM, SIGHUP and SIGQUIT end it, with SIGKILL
// after the relay's grace. It works after Close too: the stream to the
// relay stays open. Sent in the stream, it needs no exec of "signal",
// which costs a container engine a process start. Other signals are
// refused with ErrNotFramed: send those with "signal".
func (f *FrameWriter) Signal(sig syscall.Signal) error {
	switch sig {
	case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT:
	default:
		return fmt.Errorf("signal %v: %w", sig, ErrNotFramed)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	_, err := f.w.Write(binary.BigEndian.AppendUint32(nil, wire.SignalFrame|uint32(sig)))
	return err
}

// signalWithin is Signal, given up after d when the stream stalls: the
// program stops reading its stdin, and so does the relay. The caller
// then sends the signal by an exec of "signal" instead; the frame may
// still land later, which is harmless for a signal that ends the process
// (SIGINT, which only interrupts and must not arrive late, goes by exec).
func (f *FrameWriter) signalWithin(sig syscall.Signal, d time.Duration) error {
	sent := make(chan error, 1)
	go func() { sent <- f.Signal(sig) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-sent:
		return err
	case <-t.C:
		return fmt.Errorf("signal %v: the relay's stdin is stalled", sig)
	}
}

// framedWait is how long SendSignal lets signalWithin wait.
const framedWait = 500 * time.Millisecond

// SendSignal sends sig to the program a relay runs with --stdin framed
// and --tag tag, for a driver whose engine cannot signal an exec'd
// process: SIGTERM, SIGHUP and SIGQUIT in the relay's stdin, which spares
// a process start in the container; SIGINT, any other, and a stalled
// stream by running "relay signal" with run. where names the container
// for the error.
func SendSignal(ctx context.Context, stdin *FrameWriter, run Runner, relayPath, tag string, sig syscall.Signal, where string) error {
	if sig != syscall.SIGINT && stdin.signalWithin(sig, framedWait) == nil {
		return nil
	}
	r, err := run(ctx, SignalArgs(relayPath, tag, unix.SignalName(sig)), nil)
	if err != nil {
		return err
	}
	if r.Code != 0 {
		return fmt.Errorf("signal %v in %s: %s", sig, where, r.Stderr)
	}
	return nil
}

// ErrNotFramed is Signal's error for a signal the relay does not take in
// its stdin.
var ErrNotFramed = errclass.Case("the relay takes only SIGINT, SIGTERM, SIGHUP and SIGQUIT in its stdin", errclass.ErrInvalid)

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
