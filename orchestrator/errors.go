package orchestrator

import "github.com/berth-dev/berth/internal/errclass"

// The core's kinds of the error classes (internal/errclass); wrap them
// with %w so that the protocol layer maps them to codes.
var (
	// ErrUnknownRun: no live run with that id on this connection; a
	// case of not found.
	ErrUnknownRun = errclass.Kind("unknown run", errclass.ErrNotFound)
	// ErrInvalid: a bad argument or parameter.
	ErrInvalid = errclass.ErrInvalid
	// ErrRunEnded: the run ended; a case of gone.
	ErrRunEnded = errclass.Kind("run ended", errclass.ErrGone)
	// ErrUnavailable: a resource the request needs cannot serve now.
	ErrUnavailable = errclass.ErrUnavailable
)
