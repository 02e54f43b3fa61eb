package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/internal/procfs"
)

// handle is one host process. Its owner goroutine (wait) waits for the
// process and closes done; the exit status is read only after done.
type handle struct {
	cmd *exec.Cmd
	// relayed: cmd is the relay, which runs the program and hands it
	// stdinPipe's other end (relay.StdinInherit).
	relayed   bool
	stdinPipe *os.File
	stdin     io.WriteCloser
	stdout    *eofCloser
	stderr    io.Reader // nil when Cmd.Stderr was given

	done     chan struct{}
	code     int
	err      error
	killOnce sync.Once

	progKnown chan struct{} // closed once prog is set, or cannot be
	prog      int

	// A kept process's (Cmd.Keep): its relay's tag, its hold socket (""
	// when it does not hold: why says why), the program's stdio as the
	// relay handed it over, and the copies of its stderr.
	tag, held, why string
	handed         *relay.Handover
	waitStderr     func() // nil: no copies
}

var (
	_ enclosure.Process  = (*handle)(nil)
	_ enclosure.Kept     = (*handle)(nil)
	_ enclosure.Dropper  = (*handle)(nil)
	_ enclosure.Resident = (*handle)(nil)
)

// Pid is the program's pid: under the relay, the relay's child (found by
// findProg; 0 if the relay ended before it started one).
func (h *handle) Pid() int {
	if !h.relayed {
		return h.cmd.Process.Pid
	}
	<-h.progKnown
	return h.prog
}

// findProg finds the program the relay started: the relay's child that
// leads a process group of its own. The relay starts it at once; it is
// looked for from the start, since once the relay has ended it cannot be
// told. The relay's children are read from its threads' children lists,
// not from a scan of every process, which would cost each start
// milliseconds.
func (h *handle) findProg() {
	defer close(h.progKnown)
	relay := h.cmd.Process.Pid
	for {
		for _, pid := range procfs.Children(relay) {
			if p, ok := procfs.Read(pid); ok && p.PGID == pid {
				h.prog = pid
				return
			}
		}
		select {
		case <-h.done:
			return
		case <-time.After(200 * time.Microsecond):
		}
	}
}

// RSS is the resident memory of the program and everything it started,
// read in /proc.
func (h *handle) RSS(context.Context) (int64, error) { return treeRSS(h.Pid()) }

// treeRSS is the resident memory of pid and its descendants.
func treeRSS(pid int) (int64, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("the process has ended: %w", enclosure.ErrNotFound)
	}
	n, ok := procfs.TreeRSS(pid)
	if !ok {
		return 0, fmt.Errorf("process %d: its memory cannot be read in /proc: %w", pid, enclosure.ErrNotFound)
	}
	return n, nil
}

func (h *handle) Stdin() io.WriteCloser { return h.stdin }
func (h *handle) Stdout() io.Reader     { return h.stdout }
func (h *handle) Stderr() io.Reader     { return h.stderr }

// Signal sends sig to the whole process group. Under the relay that is
// the relay's: it passes SIGINT on to the program's group, and ends the
// group (after its grace) on SIGTERM, SIGHUP and SIGQUIT.
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
//
// Under the relay it kills the relay's descendants and leaves the relay
// to reap them: the relay is their subreaper, and it exits once it has
// no child left, so Wait returns with the whole tree gone, zombies
// included. Killed with them, it would leave them to this machine's
// init, which reaps them when it will. A Kill that comes before the
// relay has started the program kills it once it has. A relay that has
// not exited within relayReapWait is killed too, after its descendants
// once more.
func (h *handle) Kill() error {
	h.killOnce.Do(func() {
		select {
		case <-h.done:
			return // reaped: its pid may be another process's now
		default:
		}
		relayPid := h.cmd.Process.Pid
		killDescendants(relayPid)
		if !h.relayed {
			_ = syscall.Kill(-relayPid, syscall.SIGKILL)
			return
		}
		go func() {
			deadline := time.NewTimer(relayReapWait)
			defer deadline.Stop()
			started := h.progKnown
			for {
				select {
				case <-h.done:
					return
				case <-started:
					started = nil
					killDescendants(relayPid) // a program started after the first pass
				case <-deadline.C:
					killDescendants(relayPid)
					// By its pidfd: a relay reaped meanwhile is not
					// mistaken for a process that took its pid.
					_ = h.cmd.Process.Signal(os.Kill)
					return
				}
			}
		}()
	})
	return nil
}

// killDescendants sends SIGKILL to every descendant of pid, whatever
// process group it moved to.
func killDescendants(pid int) {
	for _, d := range procfs.Descendants(pid) {
		_ = syscall.Kill(d, syscall.SIGKILL)
	}
}

// relayReapWait bounds how long Kill leaves a relay to reap the tree it
// killed and exit. The relay's own loop takes milliseconds; a relay that
// takes longer is stopped or wedged, and is killed with what is left.
const relayReapWait = 2 * time.Second

func (h *handle) Done() <-chan struct{} { return h.done }

func (h *handle) Wait() (int, error) {
	<-h.done
	return h.code, h.err
}

func (h *handle) wait() {
	err := h.cmd.Wait()
	// The leader is gone; end whatever it left in its group, so nothing
	// outlives it and the pipes reach EOF. A relay's group is the relay
	// alone (its program leads one of its own, which the relay ended):
	// its pid, reaped, may be another process's by now.
	if !h.relayed {
		_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
	}
	h.code = h.cmd.ProcessState.ExitCode()
	if h.relayed && h.code > 128 {
		h.code = -1 // the relay reports death by signal N as 128+N
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		h.err = err
	}
	h.stdinPipe.Close()
	h.waitCopies()
	close(h.done)
}

// copyWait bounds the wait for a kept process's stderr copies once its
// relay exited: the relay ends the whole tree first, so the pipes are at
// their end by then, unless a process escaped it.
const copyWait = 2 * time.Second

func (h *handle) waitCopies() {
	if h.waitStderr == nil {
		return
	}
	copied := make(chan struct{})
	go func() { h.waitStderr(); close(copied) }()
	select {
	case <-copied:
	case <-time.After(copyWait):
	}
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
