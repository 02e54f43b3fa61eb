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

// Hello is what a relay run with --hold sends Berth, as one line of JSON,
// with the descriptors it names (SCM_RIGHTS): on --connect's socket once
// the program started, and on its hold socket to a Berth that came back
// and said its token. To that Berth it later sends one more line, with
// Exit set, when the program ended and nothing of its tree is left.
type Hello struct {
	// Pid is the program's and Relay the relay's, as the relay sees
	// them; Tag is its --tag.
	Pid   int    `json:"pid,omitempty"`
	Relay int    `json:"relay,omitempty"`
	Tag   string `json:"tag,omitempty"`
	// Fds names the descriptors that come with the line, in order: the
	// write end of the program's stdin ("stdin"; left out once Berth
	// closed it), the read ends of its stdout and stderr.
	Fds []string `json:"fds,omitempty"`
	// Hold is the socket the relay listens on for a Berth that comes
	// back; empty when it does not hold, and HoldError says why.
	Hold      string `json:"hold,omitempty"`
	HoldError string `json:"holdError,omitempty"`
	// Refused says why a Berth that came back is turned away (a wrong
	// token, another Berth attached, the program ending).
	Refused string `json:"refused,omitempty"`
	// Exit is the program's exit code (128+N for a signal N), in the
	// last line.
	Exit *int `json:"exit,omitempty"`
}

// The names in Hello.Fds.
const (
	FdStdin  = "stdin"
	FdStdout = "stdout"
	FdStderr = "stderr"
	// FdControl is the connection to the holding relay that "berth-relay
	// take" made and said the token on: from then on the relay's control
	// (frames to it, its last line the exit), passed on to Berth.
	FdControl = "control"
)

// Exit codes of "berth-relay take" that say why it took nothing back
// (its stderr says more).
const (
	// ExitTakeNone: no relay listens on the hold socket (the process
	// ended, or was never held there).
	ExitTakeNone = 3
	// ExitTakeExpired: the relay ended the process, no Berth having come
	// back within its grace (it left the socket's note, which take read
	// and removed).
	ExitTakeExpired = 4
	// ExitTakeRefused: the relay refused the token (a wrong one, another
	// Berth attached, the program ending).
	ExitTakeRefused = 5
)

// MaxHello bounds a Hello line.
const MaxHello = 4 << 10
