// Package enclosure runs processes for a run in the conversation's existing
// sandbox (a container) or, when there is none, on the host. It finds
// enclosures and never creates one.
//
// Enclosure is the one core interface. Each driver lives in a package of
// its own (enclosure/host, enclosure/docker, ...) split as Nomad splits a
// task driver: a driver (Driver: finds and attaches), an enclosure with its
// state (one attached sandbox), and a handle (one running process with one
// owner goroutine that waits and closes its done channel). Drivers are
// looked up in a table (Lookup); naming a driver that is not in it is an
// error, never a silent fallback.
package enclosure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/berth-dev/berth/internal/errclass"
)

// Enclosure is where a run's processes live.
type Enclosure interface {
	Driver() string // "host", "docker", "containerd", "kubernetes"
	ID() string
	// Capabilities says what the enclosure shares with Berth, for the
	// callers whose behaviour depends on it (never ask Driver for that).
	Capabilities() Capabilities
	// Start starts a process with stdio pipes. ctx bounds the start only:
	// the process lives until it exits or is killed, so the caller owns
	// the Process and must Kill or Wait it (tie it to its run with OnEnd).
	Start(ctx context.Context, cmd Cmd) (Process, error)
	// LookPath resolves an executable as the enclosure sees it.
	LookPath(ctx context.Context, name string) (string, error)
	// Dial connects to a TCP port inside the enclosure (dlv dap, debugpy).
	Dial(ctx context.Context, port int) (net.Conn, error)
	// MapPath turns a workspace path on the host into the path the
	// enclosure's processes see.
	MapPath(hostPath string) (string, error)
	// HostPath is MapPath's inverse: a path as the enclosure's processes
	// see it (an LSP URI, a DAP stack frame) turned into the host's path.
	// A path outside every mount is an error wrapping ErrNotFound.
	HostPath(enclosedPath string) (string, error)
	// Writable says whether the enclosure's processes may write a file
	// at a workspace path on the host: nil when they may (the host, a
	// read-write mount), else an error naming the read-only mount that
	// shows it. A path the enclosure does not see is MapPath's error, not
	// this one's: nil.
	Writable(hostPath string) error
}

// Capabilities is what an enclosure shares with Berth. The zero value is
// a container's: its own pids, and only its mounts of Berth's files.
type Capabilities struct {
	// SharedPIDs: the enclosure's processes see Berth's process ids, so a
	// program may watch Berth's pid (LSP's processId) and Berth may name
	// theirs.
	SharedPIDs bool
	// SharedFiles: the enclosure's processes see Berth's whole file
	// system at Berth's own paths, not only the workdir through a mount:
	// a path outside the workdir is theirs as well, and a file they write
	// anywhere is one Berth can read and remove.
	SharedFiles bool
	// User is who the enclosure runs processes as, as Berth set it (a
	// name or uid); "" for a container's own user.
	User string
	// Relay names the relay that carries the enclosure's processes: its
	// path, which holds its version; "" when none does. Two processes
	// started with the same Cmd under equal Capabilities in one enclosure
	// run alike, so one may stand for the other (a parked language
	// server, orchestrator/lsp).
	Relay string
}

// Resident is a process whose resident memory can be read: the host's
// through /proc, a container's through the relay that runs it.
type Resident interface {
	// RSS is the resident memory, in bytes, of the process and of
	// everything it started.
	RSS(ctx context.Context) (int64, error)
}

// Cmd is a process to start.
type Cmd struct {
	Path string   // executable; resolved with LookPath when it has no slash
	Args []string // arguments after the executable
	Env  []string // added to the enclosure's environment, KEY=VALUE
	// Dir is the working directory. Like Path and every argument that
	// names a file, it is as the enclosure sees it: callers pass MapPath's
	// results, never host paths.
	Dir string
	// Stderr, when set, receives the process's stderr instead of a pipe.
	Stderr io.Writer
	// Keep, when set, asks that the process outlive a Berth that goes
	// away without stopping it (a crash, a kill -9): see Keep. nil: the
	// process ends with Berth, as every process did before.
	Keep *Keep
}

// Keep is how a process is kept when Berth goes away without stopping
// it. Its relay holds it, with its stdin, stdout and stderr open, for
// Grace, waiting for a Berth to come back to its hold socket with Token;
// when none does, it ends the tree as it would have at once. An orderly
// stop (Kill, Signal, Stop) never holds. A process whose enclosure
// cannot keep it (no relay, or stdio through the exec's stream) runs as
// without Keep: it is not Kept.
type Keep struct {
	// Kind and Role say what the process is (a kernel and its language,
	// a language server and its name): what a Berth that comes back does
	// with it. The enclosure does not read them.
	Kind, Role string
	// Token is what a Berth that comes back says first; it goes to the
	// relay on its stdin, never on a command line or in an environment,
	// which other processes can read.
	Token string
	// Grace is how long the relay waits for a Berth; 0: the process is
	// not kept (a tool asks with Kind and Role, and Berth fills in Token,
	// Grace and Dir when it has a state directory to record it in).
	Grace time.Duration
	// Dir is where the relay listens, as Berth sees it, for an enclosure
	// that shares Berth's files (the host): a private directory of
	// Berth's, never a workdir. A container's relay listens in its own
	// temporary directory (relay.HoldDir).
	Dir string
}

// Kept is a process started with Cmd.Keep.
type Kept interface {
	// Held says where its relay waits for a Berth that comes back (its
	// hold socket, as the enclosure sees it) and its tag; socket is ""
	// when the relay could not hold it, and why says why.
	Held() (socket, tag, why string)
}

// Reattacher is an enclosure that can take back a process a Berth that
// went away left to its relay (Cmd.Keep), from the state's record of it
// (Hold). A relay that is not there is an error wrapping os.ErrNotExist
// or ECONNREFUSED; one that refuses the token, relay.ErrRefused. An
// error that the relay had ended the process, no Berth having come back
// within its grace, wraps ErrHoldExpired. The host and every container
// driver (through enclosure/relayexec) are Reattachers.
type Reattacher interface {
	Reattach(ctx context.Context, h Hold) (Process, error)
}

// Hold is where a kept process's relay waits for a Berth, as the state
// records it.
type Hold struct {
	// Socket is the relay's hold socket, as the enclosure sees it, and
	// Token what a Berth that comes back says there.
	Socket, Token string
	// Dir is a directory both Berth and the enclosure see, as the
	// enclosure sees it (the run's workdir, MapPath): a container's
	// relay, whose hold socket Berth cannot reach from outside, passes
	// the process on to Berth through a stdio socket there, as at its
	// start. The host needs none.
	Dir string
}

// ErrHoldExpired is Reattach's error for a process whose relay ended it,
// no Berth having come back within its grace (enclosure.reattach_grace).
// It is also ErrGone.
var ErrHoldExpired = errclass.Kind("held past its grace", errclass.ErrGone)

// Dropper is a process Berth can let go of as a Berth that died would:
// no signal, its connections to the process closed. A process started
// with Keep is then held by its relay; any other ends. For tests of what
// a crash of Berth leaves.
type Dropper interface {
	Drop()
}

// Process is one started process and everything it started.
type Process interface {
	// Pid is the process id as the driver sees it (0 if unknown: then
	// the process may be Tagged; Describe names it either way).
	Pid() int
	Stdin() io.WriteCloser
	Stdout() io.Reader
	// Stderr is nil when Cmd.Stderr was set.
	Stderr() io.Reader
	// Signal sends sig to the process group (SIGINT interrupts a kernel).
	Signal(sig os.Signal) error
	// Kill kills the process and every process it started. Safe to call
	// more than once and after exit.
	Kill() error
	// Done is closed when the process has exited (its output may still be
	// buffered in the pipes: read Stdout and Stderr to EOF, which also
	// releases them).
	Done() <-chan struct{}
	// Wait waits for exit and returns the exit code (-1 if killed by a
	// signal) and an error for anything but a plain non-zero exit.
	Wait() (int, error)
}

// The error classes, Berth's one set (internal/errclass) under the
// names the drivers use; wrap them with %w.
var (
	ErrNotFound = errclass.ErrNotFound
	// ErrGone marks an enclosure that is not running or no longer
	// exists (a stopped or removed container): nothing started in it can
	// help, only another enclosure. It is also ErrNotFound.
	ErrGone = errclass.ErrGone
	// ErrNotSupported marks what this enclosure cannot do: a case of
	// invalid.
	ErrNotSupported  = errclass.Kind("not supported", errclass.ErrInvalid)
	ErrInvalidConfig = errclass.ErrInvalid
	// ErrPaused marks an enclosure that exists but is paused (docker
	// pause, a paused containerd task): its processes keep their state
	// and answer nothing until it is unpaused, and the engine starts
	// nothing in it. It is also ErrUnavailable: the call can succeed
	// once the enclosure is unpaused, in the same run.
	ErrPaused     = errclass.Kind("paused", errclass.ErrUnavailable)
	ErrPermission = errclass.ErrPermission
	// ErrRefused marks an engine that refuses Berth's identity (a
	// cluster's 403, or a 401 for credentials it does not accept): a
	// case of permission, and, unlike a read-only mount's, one that
	// keeps the whole enclosure from serving (Down).
	ErrRefused = errclass.Kind("refused", errclass.ErrPermission)
)

// Down reports whether err says the enclosure itself cannot serve: it
// stopped, was removed or is paused (ErrGone, ErrPaused), its engine did
// not answer (ErrUnavailable) or refuses Berth (ErrRefused). Such an
// error names the enclosure and says what to do, and no program in it is
// to blame: a caller passes it on rather than guess at the program ("not
// on the PATH").
func Down(err error) bool {
	return errors.Is(err, ErrGone) || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrRefused)
}

// Say is err's message for a person: without the class words the %w
// sentinels append (": paused", ": gone"), which tell code what happened
// and only make a sentence longer.
func Say(err error) string { return errclass.Say(err) }

// Checker is an enclosure that can say whether it still serves: nil
// while it runs, else an error for which Down is true, naming it and
// saying what to do. Container enclosures implement it; the host needs
// not.
type Checker interface {
	Check(ctx context.Context) error
}

// Check asks enc whether it still serves (see Checker); an enclosure that
// cannot say, or none, is taken to serve. Callers ask once a call has
// failed or hung, to tell the enclosure's fault from the program's. The
// look is bounded by CheckWait and not by ctx's cancellation: a caller
// whose own call was cancelled still learns why.
func Check(ctx context.Context, enc Enclosure) error {
	c, ok := enc.(Checker)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CheckWait)
	defer cancel()
	return c.Check(ctx)
}

// CheckWait bounds Check: an engine that does not answer takes its
// driver's own API timeout to say so.
const CheckWait = 15 * time.Second

// Tagged is a process whose pid the driver cannot know (a Kubernetes
// exec) but whose relay carries a tag of its own.
type Tagged interface {
	Tag() string
}

// Describe names p for a status line: "pid N" where the driver knows its
// pid, else "relay tag T", so that two processes can always be told
// apart.
func Describe(p Process) string {
	if pid := p.Pid(); pid > 0 {
		return fmt.Sprintf("pid %d", pid)
	}
	if t, ok := p.(Tagged); ok && t.Tag() != "" {
		return "relay tag " + t.Tag()
	}
	return "pid unknown"
}

// Driver finds and attaches to the enclosures of one kind. It never
// creates, starts, stops or removes one.
type Driver interface {
	// Name is the driver's name in run/start's {driver, id}.
	Name() string
	// Attach returns the running enclosure with this id (or name). One
	// that is missing or not running is an error that says so.
	Attach(ctx context.Context, id string) (Enclosure, error)
	// Find returns the ids of the running enclosures labelled
	// berth.conversation=<conversationID>, for "auto". An engine that does
	// not answer is an error wrapping ErrUnavailable.
	Find(ctx context.Context, conversationID string) ([]string, error)
}

// ErrUnavailable marks an engine that did not answer, or an enclosure
// that is paused (ErrPaused); "auto" skips it.
var ErrUnavailable = errclass.ErrUnavailable

// ConversationLabel is the label "auto" looks for, its value the
// conversation's id.
const ConversationLabel = "berth.conversation"

// CheckPort is every Dial's first step: a port outside 1-65535 is an
// error wrapping ErrInvalidConfig, before any engine is asked.
func CheckPort(port int) error {
	if port <= 0 || port > 65535 {
		return fmt.Errorf("port %d out of range 1-65535: %w", port, ErrInvalidConfig)
	}
	return nil
}

// CheckSignal is a container handle's first step in Signal: sig must be
// a syscall.Signal (else an error wrapping ErrNotSupported), and the
// process must not have exited (done closed), which is an error that says
// so rather than a signal sent to nothing.
func CheckSignal(sig os.Signal, done <-chan struct{}) (syscall.Signal, error) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return 0, fmt.Errorf("signal %v: %w", sig, ErrNotSupported)
	}
	select {
	case <-done:
		return 0, fmt.Errorf("signal %v: the process has exited", sig)
	default:
	}
	return s, nil
}

// Stop ends p as os/exec's Cancel and WaitDelay do: it sends sig (SIGTERM
// when nil; closing stdin is the caller's first step where the process
// ends on EOF), waits up to grace for the process to exit, then kills it
// and everything it started. It returns once the process has exited.
func Stop(p Process, sig os.Signal, grace time.Duration) {
	if sig == nil {
		sig = syscall.SIGTERM
	}
	StopFunc(p, func() { _ = p.Signal(sig) }, grace)
}

// StopFunc is Stop with the caller's own request to end instead of a
// signal, as os/exec's Cancel is: a language server's shutdown and exit,
// a debug adapter's disconnect. ask (nil: none) runs first and should
// bound itself; the grace counts from its return. This is the one kill
// grace: every owner of a process ends it through Stop or StopFunc.
func StopFunc(p Process, ask func(), grace time.Duration) {
	select {
	case <-p.Done():
		return
	default:
	}
	if ask != nil {
		ask()
	}
	if grace > 0 {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.Done():
			return
		case <-t.C:
		}
	}
	_ = p.Kill()
	<-p.Done()
}
