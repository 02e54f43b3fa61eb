package relayexec

import (
	"io"

	"github.com/berth-dev/berth/enclosure/internal/pipe"
)

// outputBytes is what each stream holds for a reader that is behind, as
// an OS pipe would: past it the exec's stream waits, as the process would
// wait on a full pipe.
const outputBytes = 256 << 10

// Piped is a Stream whose engine hands over the exec's output by a copy
// (Docker's multiplexed stream, the Kubernetes exec stream): its owner
// goroutine copies stdout and stderr into pipes, closes Ended, then reads
// the exit code.
type Piped struct {
	*pipe.Output
	stdin io.WriteCloser
	pid   int
	ended chan struct{}
	drop  func()
}

// PipedFuncs are the engine's parts of a Piped stream.
type PipedFuncs struct {
	// Copy copies the exec's stdout and stderr until its stream ends.
	Copy func(stdout, stderr io.Writer) error
	// Exit returns the exit code once the stream ended (Copy's error
	// given), or the error, explained, when the end is not known.
	Exit func(copyErr error) (int, error)
	// Drop lets go of the exec (Stream.Drop).
	Drop func()
}

// NewPiped starts the owner goroutine of an exec whose raw stdin is stdin
// and whose relay has pid (0: unknown), for x.
func NewPiped(x Exec, stdin io.WriteCloser, pid int, f PipedFuncs) *Piped {
	p := &Piped{Output: pipe.NewOutput(outputBytes, x.Stderr), stdin: stdin, pid: pid, ended: make(chan struct{}), drop: f.Drop}
	go func() {
		stdout, stderr := p.Writers()
		if x.Socket {
			stdout = io.Discard // the relay writes nothing there; the program has the socket
		}
		err := f.Copy(stdout, stderr)
		close(p.ended)
		p.CloseWrite()
		p.End(f.Exit(err))
	}()
	return p
}

func (p *Piped) Pid() int               { return p.pid }
func (p *Piped) Stdin() io.WriteCloser  { return p.stdin }
func (p *Piped) Ended() <-chan struct{} { return p.ended }
func (p *Piped) Drop()                  { p.drop() }
