package bridge

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
)

// endless is a stream that starts a frame and never ends it.
type endless struct {
	started bool
	n       int64
}

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	if !e.started {
		p[0], e.started = sep, true
	}
	e.n += int64(len(p))
	return len(p), nil
}

// issue 24 item 1: a frame from the kernel that never ends (a cell that
// writes a separator to the protocol's descriptor, then bytes without a
// newline) is refused at MaxFrame, having allocated about MaxFrame. Before,
// the line grew by appending: 365 MiB allocated, 243 MiB of heap, for
// the 64 MiB refused.
func TestFrameWithoutEndIsCapped(t *testing.T) {
	src := &endless{}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := NewReader(src).Read()
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("err = %v, want ErrFrameTooLarge", err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("a frame without end: read %d MiB, allocated %d MiB", src.n>>20, alloc>>20)
	if src.n > MaxFrame+128<<10 || alloc > MaxFrame+8<<20 {
		t.Errorf("read %d MiB and allocated %d MiB before refusing: want about MaxFrame (%d MiB)", src.n>>20, alloc>>20, MaxFrame>>20)
	}
}

// A large frame read in many pieces comes back whole.
func TestLargeFrameIsJoined(t *testing.T) {
	text := strings.Repeat("0123456789", 1<<20)
	var buf bytes.Buffer
	if err := NewWriter(&buf).Write(Frame{Type: TypeOutput, Text: text}); err != nil {
		t.Fatal(err)
	}
	buf.WriteString("after\n")
	r := NewReader(iotest.HalfReader(&buf))
	f, err := r.Read()
	if err != nil || f.Type != TypeOutput || f.Text != text {
		t.Fatalf("read %s frame of %d bytes, %v", f.Type, len(f.Text), err)
	}
	if f, err := r.Read(); err != nil || f.Type != TypeStray || f.Text != "after\n" {
		t.Fatalf("then %+v, %v", f, err)
	}
}
