// Package pipe is the buffered pipe the container drivers carry a
// process's output in, from the goroutine that reads the engine's stream
// to the process's reader.
package pipe

import (
	"io"
	"sync"
)

// Pipe carries one of an exec's streams from the goroutine that splits
// them (or the engine's client that demultiplexes them) to the process's
// reader. It buffers up to max bytes, as an OS pipe does, so that a
// reader of stdout is not held up by a stderr nobody has read yet; a full
// pipe makes the writer wait. Once the reader closes it, writes are
// dropped, so the other stream keeps flowing.
type Pipe struct {
	mu      sync.Mutex
	cond    sync.Cond
	buf     []byte
	max     int
	eof     bool // the writer is done
	rclosed bool // the reader is done
}

// New returns a pipe that buffers up to max bytes.
func New(max int) *Pipe {
	p := &Pipe{max: max}
	p.cond.L = &p.mu
	return p
}

func (p *Pipe) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		for len(p.buf) >= p.max && !p.rclosed {
			p.cond.Wait()
		}
		if p.rclosed {
			return n, nil
		}
		k := min(len(b), p.max-len(p.buf))
		p.buf = append(p.buf, b[:k]...)
		b = b[k:]
		p.cond.Broadcast()
	}
	return n, nil
}

func (p *Pipe) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.buf) == 0 && !p.eof && !p.rclosed {
		p.cond.Wait()
	}
	if len(p.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(b, p.buf)
	p.buf = p.buf[n:]
	if len(p.buf) == 0 {
		p.buf = nil // let a large burst's array go
	}
	p.cond.Broadcast()
	return n, nil
}

// Close is the reader's: it stops reading, and what is buffered or still
// comes is dropped.
func (p *Pipe) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rclosed, p.buf = true, nil
	p.cond.Broadcast()
	return nil
}

// CloseWrite is the writer's: the reader gets EOF after the buffer.
func (p *Pipe) CloseWrite() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.eof = true
	p.cond.Broadcast()
}
