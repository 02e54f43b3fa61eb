package debug

import (
	"errors"

	"github.com/berth-dev/berth/internal/errclass"
)

// Sentinel error classes; wrap them with %w.
var (
	// ErrEnded: the session ended while a request or a wait was pending.
	ErrEnded = errors.New("debug session ended")
	// ErrTimeout: the adapter did not answer within the wait; a case of
	// timeout.
	ErrTimeout = errclass.Case("adapter did not answer in time", errclass.ErrTimeout)
)

// adapterError is an error response from the adapter: the request was
// understood and refused, with the adapter's own message.
type adapterError struct {
	command string
	message string
}

func (e *adapterError) Error() string {
	return e.command + " failed: " + e.message
}
