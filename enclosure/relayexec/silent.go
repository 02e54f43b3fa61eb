package relayexec

import (
	"sync"
	"time"
)

// SilentMemory is how long an engine that did not answer is taken not to
// answer without asking it again.
const SilentMemory = 5 * time.Second

// Silence is an engine's last failure to answer, kept for SilentMemory:
// the calls of that moment (a LookPath per server, the check that
// explains a failed call) say so at once rather than each wait the
// engine's timeout again. Only a call that kept Berth waiting is
// remembered: an engine that refused the connection says so at once, and
// may be back for the very next call.
type Silence struct {
	mu  sync.Mutex
	err error
	at  time.Time
}

// Now is the engine's recent failure to answer, or nil.
func (s *Silence) Now() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil && time.Since(s.at) < SilentMemory {
		return s.err
	}
	return nil
}

// Remember keeps err, the error of a call the engine did not answer.
func (s *Silence) Remember(err error) {
	s.mu.Lock()
	s.err, s.at = err, time.Now()
	s.mu.Unlock()
}
