package host

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/internal/procfs"
)

// handle is one host process. Its owner goroutine (wait) waits for the
// process and closes done; the exit status is read only after done.
type handle struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *eofCloser
	stderr *eofCloser // nil when Cmd.Stderr was given

	done     chan struct{}
	code     int
	err      error
	killOnce sync.Once
}

var _ enclosure.Process = (*handle)(nil)

func (h *handle) Pid() int              { return h.cmd.Process.Pid }
func (h *handle) Stdin() io.WriteCloser { return h.stdin }
func (h *handle) Stdout() io.Reader     { return h.stdout }
func (h *handle) Stderr() io.Reader {
	if h.stderr == nil {
		return nil
	}
	return h.stderr
}

// Signal sends sig to the whole process group.
func (h *handle) Signal(sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return h.cmd.Process.Signal(sig)
	}
	return syscall.Kill(-h.cmd.Process.Pid, s)
}

// Kill kills the process group, so children the process started die too,
// and every descendant that left the group (a debugger puts its debuggee
// in a group of its own).
func (h *handle) Kill() error {
	h.killOnce.Do(func() {
		for _, pid := range procfs.Descendants(h.cmd.Process.Pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
	})
	return nil
}

func (h *handle) Done() <-chan struct{} { return h.done }

func (h *handle) Wait() (int, error) {
	<-h.done
	return h.code, h.err
}

func (h *handle) wait() {
	err := h.cmd.Wait()
	// The leader is gone; end whatever it left in its group, so nothing
	// outlives it and the pipes reach EOF.
	_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
	h.code = h.cmd.ProcessState.ExitCode()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		h.err = err
	}
	h.stdin.Close()
	close(h.done)
}

// eofCloser closes its pipe when a read reaches EOF or fails, so a caller
// that reads its process's output to the end releases the descriptor
// without having to close it. A pipe nobody reads is closed by the
// garbage collector's finalizer on *os.File.
type eofCloser struct {
	f    *os.File
	once sync.Once
}

func (e *eofCloser) Read(p []byte) (int, error) {
	n, err := e.f.Read(p)
	if err != nil {
		e.once.Do(func() { e.f.Close() })
		if !errors.Is(err, io.EOF) && errors.Is(err, os.ErrClosed) {
			err = io.EOF
		}
	}
	return n, err
}

// Close releases the pipe at once; a read blocked on it returns EOF. It
// lets a caller stop reading output that a process which escaped the
// group still holds open.
func (e *eofCloser) Close() error {
	e.once.Do(func() { e.f.Close() })
	return nil
}
