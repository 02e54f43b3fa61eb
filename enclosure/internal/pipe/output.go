package pipe

import "io"

// Output is a process's output and end as a container driver keeps them:
// stdout in a Pipe, stderr in a Pipe unless the caller gave a writer of
// its own, and the exit code and error behind Done. A handle embeds it
// for its Stdout, Stderr, Done and Wait; its owner goroutine copies the
// engine's streams into Writers, then calls CloseWrite, and End once
// the exit is known.
type Output struct {
	stdout *Pipe
	stderr *Pipe // nil when the caller gave a writer
	errW   io.Writer
	done   chan struct{}
	code   int
	err    error
}

// NewOutput returns the output of a process whose streams each buffer up
// to max bytes; stderr, when not nil, takes the process's stderr instead.
func NewOutput(max int, stderr io.Writer) *Output {
	o := &Output{stdout: New(max), errW: stderr, done: make(chan struct{})}
	if stderr == nil {
		o.stderr = New(max)
		o.errW = o.stderr
	}
	return o
}

func (o *Output) Stdout() io.Reader { return o.stdout }

// Stderr is nil when the caller gave its own writer.
func (o *Output) Stderr() io.Reader {
	if o.stderr == nil {
		return nil
	}
	return o.stderr
}

func (o *Output) Done() <-chan struct{} { return o.done }

func (o *Output) Wait() (int, error) {
	<-o.done
	return o.code, o.err
}

// Writers are where the owner goroutine copies the process's streams.
func (o *Output) Writers() (stdout, stderr io.Writer) { return o.stdout, o.errW }

// CloseWrite ends both streams: the process's output is all in. Readers
// see EOF at once, before the exit code is known.
func (o *Output) CloseWrite() {
	o.stdout.CloseWrite()
	if o.stderr != nil {
		o.stderr.CloseWrite()
	}
}

// End records how the process ended and closes Done. Call it once.
func (o *Output) End(code int, err error) {
	o.code, o.err = code, err
	close(o.done)
}
