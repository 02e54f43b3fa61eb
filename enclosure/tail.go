package enclosure

import (
	"strings"
	"sync"
	"unicode/utf8"
)

// Tail keeps the last bytes of a process's output (its stderr, say) up to
// a limit, and counts what it dropped before them. Give it as Cmd.Stderr,
// or write to it. It is safe for concurrent use.
//
// It trims only once it holds twice the limit, so each byte is copied a
// bounded number of times however chatty the process.
type Tail struct {
	limit int

	mu      sync.Mutex
	buf     []byte
	dropped int64
}

// NewTail keeps up to limit bytes (at least 1).
func NewTail(limit int) *Tail { return &Tail{limit: max(limit, 1)} }

func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.limit {
		over := len(t.buf) - t.limit
		t.dropped += int64(over)
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// String is what was kept, at most the limit, starting on a whole
// character and with any broken one replaced.
func (t *Tail) String() string {
	s, _ := t.Snapshot()
	return s
}

// Snapshot is String and the number of bytes dropped before it.
func (t *Tail) Snapshot() (string, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b, dropped := t.buf, t.dropped
	if over := len(b) - t.limit; over > 0 {
		b, dropped = b[over:], dropped+int64(over)
	}
	for len(b) > 0 && !utf8.RuneStart(b[0]) && dropped > 0 {
		b, dropped = b[1:], dropped+1
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), dropped
}
