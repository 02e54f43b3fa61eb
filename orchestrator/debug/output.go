package debug

import (
	"fmt"
	"sync"
	"unicode/utf8"
)

// capped keeps the last limit bytes written to it, and how many were
// dropped before them. It is safe for concurrent use.
type capped struct {
	limit int

	mu      sync.Mutex
	buf     []byte
	dropped int
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf = append(c.buf, p...)
	if over := len(c.buf) - c.limit; over > 0 {
		// Keep whole characters: move the cut past continuation bytes.
		for over < len(c.buf) && !utf8.RuneStart(c.buf[over]) {
			over++
		}
		c.dropped += over
		c.buf = append(c.buf[:0], c.buf[over:]...)
	}
	return len(p), nil
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.buf)
}

// report is the kept text with a note of what was dropped.
func (c *capped) report() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped == 0 {
		return string(c.buf)
	}
	return fmt.Sprintf("(output capped at %d bytes: the first %d bytes were dropped)\n%s", c.limit, c.dropped, c.buf)
}
