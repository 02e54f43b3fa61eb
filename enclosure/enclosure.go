// Package enclosure runs processes for a run in the conversation's existing
// sandbox (a container) or, when there is none, on the host. It finds
// enclosures and never creates one.
//
// Enclosure is the one core interface; each driver is split into a driver
// (the Enclosure) and a handle (one running process with one owner
// goroutine that waits and closes its done channel). Only the host driver is
// built today; naming another driver is an error, never a silent fallback.
package enclosure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
)

// Enclosure is where a run's processes live.
type Enclosure interface {
	Driver() string // "host", "docker", "containerd"
	ID() string
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
}

// Cmd is a process to start.
type Cmd struct {
	Path string   // executable; resolved with LookPath when it has no slash
	Args []string // arguments after the executable
	Env  []string // added to the enclosure's environment, KEY=VALUE
	Dir  string   // working directory, as the host sees it
	// Stderr, when set, receives the process's stderr instead of a pipe.
	Stderr io.Writer
}

// Process is one started process and everything it started.
type Process interface {
	Pid() int // the process id as the driver sees it (0 if unknown)
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

// Sentinel error classes; wrap them with %w.
var (
	ErrNotFound      = errors.New("not found")
	ErrNotSupported  = errors.New("not supported")
	ErrInvalidConfig = errors.New("invalid")
)

// Spec names an enclosure as run/start gives it: Driver "host", "auto", or
// a driver with an ID.
type Spec struct {
	Driver string `json:"driver"`
	ID     string `json:"id,omitempty"`
}

// Lookup finds the enclosure a run should use. It never creates one:
//   - "" or "host": the host;
//   - "auto": the container labelled berth.conversation=<conversationID>
//     when a container driver finds one, else the host (no container
//     driver is built today, so auto is the host);
//   - any other driver: that driver's enclosure with that ID, or an error.
func Lookup(ctx context.Context, spec Spec, conversationID string) (Enclosure, error) {
	switch spec.Driver {
	case "", "host":
		if spec.ID != "" && spec.ID != HostID {
			return nil, fmt.Errorf("host enclosure has no id %q: omit the id or use %q: %w", spec.ID, HostID, ErrInvalidConfig)
		}
		return Host(), nil
	case "auto":
		return Host(), nil
	case "docker", "containerd", "kubernetes":
		return nil, fmt.Errorf("enclosure driver %q is not built into this Berth yet: use \"host\" or \"auto\": %w", spec.Driver, ErrNotSupported)
	}
	return nil, fmt.Errorf("unknown enclosure driver %q: use \"host\" or \"auto\", the drivers built into this Berth: %w", spec.Driver, ErrInvalidConfig)
}
