package orchestrator

import "errors"

// Sentinel error classes; wrap them with %w so callers (the protocol
// layer) can map them to error codes.
var (
	ErrUnknownRun  = errors.New("unknown run")
	ErrInvalid     = errors.New("invalid argument")
	ErrRunEnded    = errors.New("run ended")
	ErrUnavailable = errors.New("unavailable")
)
