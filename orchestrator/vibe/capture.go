package vibe

import (
	"fmt"
	"unicode/utf8"
)

// capture keeps at most limit bytes of a stream and counts the rest, so a
// chatty worker costs bounded memory and its pipe never blocks. It keeps
// the head (a result reads from the start) or the tail (an error is
// usually at the end).
type capture struct {
	limit int
	tail  bool
	buf   []byte
	total int64
}

func (c *capture) Write(p []byte) (int, error) {
	c.total += int64(len(p))
	if !c.tail {
		if room := c.limit - len(c.buf); room > 0 {
			c.buf = append(c.buf, p[:min(room, len(p))]...)
		}
		return len(p), nil
	}
	c.buf = append(c.buf, p...)
	// Trim only once the buffer is twice the limit, so each byte is moved
	// a bounded number of times.
	if len(c.buf) > 2*c.limit {
		c.buf = append(c.buf[:0], c.buf[len(c.buf)-c.limit:]...)
	}
	return len(p), nil
}

// text returns what was kept, cut on a character boundary, and a note
// saying what was dropped ("" when nothing was).
func (c *capture) text() (string, string) {
	b := c.buf
	if c.tail && len(b) > c.limit {
		b = b[len(b)-c.limit:]
	}
	dropped := c.total - int64(len(b))
	if dropped == 0 {
		return string(b), ""
	}
	if c.tail {
		for len(b) > 0 && !utf8.RuneStart(b[0]) {
			b = b[1:]
		}
		return string(b), fmt.Sprintf("[cut: the first %d of %d bytes were dropped]", c.total-int64(len(b)), c.total)
	}
	if i := lastRuneStart(b); i >= 0 && !utf8.FullRune(b[i:]) {
		b = b[:i]
	}
	return string(b), fmt.Sprintf("[cut: showing the first %d of %d bytes]", len(b), c.total)
}

// lastRuneStart is the index where the last (possibly partial) character
// of b begins, or -1 when b is empty.
func lastRuneStart(b []byte) int {
	i := len(b) - 1
	for i > 0 && !utf8.RuneStart(b[i]) {
		i--
	}
	return i
}
