package debug

import (
	"fmt"

	"github.com/berth-dev/berth/enclosure"
)

// capped keeps the newest output of the debuggee (or the adapter's
// stderr) up to limit bytes, and says what it dropped.
type capped struct {
	*enclosure.Tail
	limit int
}

func newCapped(limit int) *capped { return &capped{enclosure.NewTail(limit), limit} }

// report is the kept text with a note of what was dropped.
func (c *capped) report() string {
	s, dropped := c.Snapshot()
	if dropped == 0 {
		return s
	}
	return fmt.Sprintf("(output capped at %d bytes: the first %d bytes were dropped)\n%s", c.limit, dropped, s)
}
