// Package wire is the contract between berth-relay and the code that runs
// it: run's stdin modes, the header of a framed stdin, the token of run
// --connect, the line dial writes once connected, and the exit codes of the relay's own failures.
// Both sides import these from here, so they cannot drift apart. It
// imports nothing, so the relay binary stays small.
package wire

// Stdin modes of "berth-relay run --stdin".
const (
	// StdinRaw passes the bytes through; their EOF ends the run after
	// the grace.
	StdinRaw = "raw"
	// StdinFramed carries frames: an empty frame closes the program's
	// stdin, and only EOF of the relay's own stdin (the caller went
	// away) ends the run.
	StdinFramed = "framed"
	// StdinInherit hands the program the relay's stdin itself: no copy,
	// one pipe hop fewer per message. Its EOF is the program's alone;
	// only signals to the relay and its parent's death end the run, so
	// it is for a caller that can signal the relay (the host).
	StdinInherit = "inherit"
)

// A framed stdin is a series of frames, each a 4-byte big-endian header
// and then, for a length, that many bytes.
const (
	// MaxFrame bounds one frame's length, so the relay never copies a
	// frame larger than this in one piece.
	MaxFrame = 1 << 20
	// SignalFrame marks a header that carries a signal in its low byte,
	// not a length: no frame is that long.
	SignalFrame = 1 << 31
)

// ReadyLine is the line "berth-relay dial --ready" writes to its stderr
// once it is connected.
const ReadyLine = "berth-relay: dial: connected"

// Exit codes of the relay's own failures, as shells and docker run use
// them, so a caller can tell them from the program's (which the relay
// passes through).
const (
	ExitRelayFailed = 125
	ExitNotExec     = 126
	ExitNotFound    = 127
)
