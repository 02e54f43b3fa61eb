package relay

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"

	"github.com/berth-dev/berth/enclosure"
)

// HeldStdin is the stdin of a held program: w is Berth's copy of its
// write end, frames the relay's control. Close closes both Berth's copy
// and, with the empty frame, the relay's, so that the program reads EOF.
func HeldStdin(w *os.File, frames *FrameWriter) io.WriteCloser {
	return &heldStdin{File: w, frames: frames}
}

type heldStdin struct {
	*os.File
	frames *FrameWriter
	once   sync.Once
}

func (s *heldStdin) Close() error {
	var err error
	s.once.Do(func() {
		err = s.File.Close()
		if ferr := s.frames.Close(); err == nil {
			err = ferr
		}
	})
	return err
}

// closedStdin is the stdin of a held program whose stdin a Berth closed
// before: a write fails as one to a closed pipe does.
type closedStdin struct{}

func (closedStdin) Write([]byte) (int, error) { return 0, syscall.EPIPE }
func (closedStdin) Close() error              { return nil }

// Held is a process Berth took back from its relay (Reattach), as an
// enclosure.Process: its stdio is the Handover's, its control the
// connection, on which signals go as frames and the relay's last line
// says the exit. Its owner goroutine reads that line and closes Done.
type Held struct {
	h      *Handover
	conn   *net.UnixConn
	frames *FrameWriter
	stdin  io.WriteCloser
	stdout io.Reader
	stderr io.Reader
	kill   func()

	done     chan struct{}
	code     int
	err      error
	killOnce sync.Once
}

var _ enclosure.Process = (*Held)(nil)

// NewHeld owns h and conn from here. kill, when set, ends the tree at
// once by the enclosure's own means (the host: SIGKILL by pid), after
// Kill's framed SIGTERM; nil: the relay's grace does it.
func NewHeld(h *Handover, conn *net.UnixConn, kill func()) *Held {
	p := &Held{h: h, conn: conn, frames: NewFrameWriter(conn), kill: kill, done: make(chan struct{})}
	p.stdin = closedStdin{}
	if h.Stdin != nil {
		p.stdin = HeldStdin(h.Stdin, p.frames)
	}
	p.stdout = eofCloser{h.Stdout}
	p.stderr = eofCloser{h.Stderr}
	go p.wait()
	return p
}

func (p *Held) wait() {
	code, err := ReadExit(p.conn)
	if err != nil {
		code, err = -1, nil // killed: its end was Berth's doing, or the relay's
	} else if code > 128 {
		code = -1 // a signal, as the other handles report it
	}
	p.conn.Close()
	p.code, p.err = code, err
	close(p.done)
}

// Pid is the program's pid, as its enclosure sees it.
func (p *Held) Pid() int              { return p.h.Pid }
func (p *Held) Stdin() io.WriteCloser { return p.stdin }
func (p *Held) Stdout() io.Reader     { return p.stdout }
func (p *Held) Stderr() io.Reader     { return p.stderr }
func (p *Held) Done() <-chan struct{} { return p.done }

// Held is where the relay holds it again should Berth go away.
func (p *Held) Held() (socket, tag, why string) { return p.h.Hold, p.h.Tag, p.h.HoldError }

func (p *Held) Wait() (int, error) {
	<-p.done
	return p.code, p.err
}

// Signal has the relay act on sig (SIGINT interrupts; SIGTERM, SIGHUP
// and SIGQUIT end the tree, SIGKILL after the relay's grace).
func (p *Held) Signal(sig os.Signal) error {
	s, err := enclosure.CheckSignal(sig, p.done)
	if err != nil {
		return err
	}
	return p.frames.Signal(s)
}

// Kill ends the tree: a framed SIGTERM (an orderly stop: the relay does
// not hold), then the enclosure's kill when there is one.
func (p *Held) Kill() error {
	p.killOnce.Do(func() {
		select {
		case <-p.done:
			return
		default:
		}
		_ = p.frames.Signal(syscall.SIGTERM)
		if p.kill != nil {
			p.kill()
		}
	})
	return nil
}

// Drop lets go of the process as a Berth that died would: the relay
// holds it again.
func (p *Held) Drop() {
	p.conn.Close()
	p.h.Close()
}

// eofCloser closes its pipe when a read reaches its end or fails, so a
// reader that reads to the end releases it.
type eofCloser struct{ f *os.File }

func (e eofCloser) Read(b []byte) (int, error) {
	n, err := e.f.Read(b)
	if err != nil {
		e.f.Close()
		err = io.EOF
	}
	return n, err
}
