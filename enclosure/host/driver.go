// Package host is the host enclosure: the fallback where a conversation
// has no container, so a run's processes run on Berth's own machine.
//
// It is split as a Nomad task driver is: the enclosure (this file: finds
// executables, starts processes under the relay, maps paths, which on the
// host is the identity), the handle (handle.go: one running process, with
// the one goroutine that waits for it) and the state the enclosure keeps
// between processes (state.go: the relay it found, the environment no
// child may inherit).
package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/internal/errclass"
)

// ID is the ID of the host enclosure.
const ID = "local"

// Enclosure is the host enclosure. Every process runs under Berth's relay
// (cmd/berth-relay run), each in a process group of its own so Kill
// reaches everything it started, with Berth's environment less its
// secrets (SecretEnv, Options.Drop). The relay is what makes a kill -9 of Berth
// leave nothing behind: a parent-death signal reaches only Berth's direct
// child, while the relay, as that child, kills its program's whole tree
// when Berth dies, and everything the program left when it exits.
type Enclosure struct {
	opts  Options
	relay relayState
}

// Options configure the host enclosure.
type Options struct {
	// Relay finds the relay; nil: relay.Find ($BERTH_RELAY, berth-relay
	// next to Berth's executable, then on PATH).
	Relay func() (*relay.Binary, error)
	// Log receives the one warning when there is no relay; nil:
	// slog.Default().
	Log *slog.Logger
	// Drop names the variables of Berth's environment, besides
	// SecretEnv, that the processes it starts (language servers,
	// kernels, debug adapters and their programs, workers) do not
	// inherit: the env.drop configuration key.
	Drop []string
}

var _ enclosure.Enclosure = (*Enclosure)(nil)

// New returns the host enclosure with the default options.
func New() *Enclosure { return NewWith(Options{}) }

// NewWith returns the host enclosure with o.
func NewWith(o Options) *Enclosure {
	if o.Relay == nil {
		o.Relay = relay.Find
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Enclosure{opts: o}
}

// Driver is "host".
func (*Enclosure) Driver() string { return "host" }

// ID is ID.
func (*Enclosure) ID() string { return ID }

// Capabilities: the host shares Berth's pids and its whole file system;
// its processes run as Berth's user, under the relay Berth found.
func (e *Enclosure) Capabilities() enclosure.Capabilities {
	return enclosure.Capabilities{SharedPIDs: true, SharedFiles: true, User: strconv.Itoa(os.Getuid()), Relay: e.relayPath()}
}

// LookPath looks name up on Berth's own PATH.
func (*Enclosure) LookPath(_ context.Context, name string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s: executable not found on the host's PATH: %w", name, enclosure.ErrNotFound)
	}
	return p, nil
}

// Dial connects to a port on the loopback address.
func (*Enclosure) Dial(ctx context.Context, port int) (net.Conn, error) {
	if err := enclosure.CheckPort(port); err != nil {
		return nil, err
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
}

// MapPath is the identity: the host's processes see the host's paths.
func (*Enclosure) MapPath(hostPath string) (string, error) { return filepath.Clean(hostPath), nil }

// HostPath is the identity too.
func (*Enclosure) HostPath(enclosedPath string) (string, error) {
	return filepath.Clean(enclosedPath), nil
}

// Writable is nil: Berth writes the host's files as the host's processes
// would.
func (*Enclosure) Writable(string) error { return nil }

// Start starts c.
func (e *Enclosure) Start(ctx context.Context, c enclosure.Cmd) (enclosure.Process, error) {
	path := c.Path
	if filepath.Base(path) == path {
		p, err := e.LookPath(ctx, path)
		if err != nil {
			return nil, err
		}
		path = p
	} else if err := executable(path, c.Dir); err != nil {
		// Checked here: the relay would start, and only then fail.
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	argv := append([]string{path}, c.Args...)
	attr := &syscall.SysProcAttr{Setpgid: true}
	relayPath := e.relayPath()
	if c.Keep != nil && c.Keep.Grace > 0 && relayPath != "" {
		return e.startKept(path, c, relayPath)
	}
	if relayPath != "" {
		// Inherited stdin: the program reads Berth's pipe itself, with no
		// copy in the relay between them (a language server's request
		// costs one wake-up fewer), and closing Stdin closes the
		// program's only. Berth signals the relay directly, and its death
		// reaches the relay by the parent-death signal the relay arms
		// itself, which ends the whole tree, where a SIGKILL would orphan
		// it: so no parent-death signal here.
		argv = relay.RunArgs(relayPath, relay.RunOptions{Stdin: relay.StdinInherit}, path, c.Args...)
	} else {
		attr.Pdeathsig = syscall.SIGKILL
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = c.Dir
	cmd.Env = childEnv(e.opts.Drop, c.Env)
	cmd.SysProcAttr = attr
	// Plain OS pipes rather than exec's Pipe helpers: exec.Cmd.Wait closes
	// those when the process exits, which can cut off output still being
	// read. With our own pipes the reader sees EOF once every writer (the
	// process and anything it started) has closed, and Wait can run at once.
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, err
	}
	growPipe(stdoutW, stdoutPipeBytes)
	cmd.Stdin, cmd.Stdout = stdinR, stdoutW
	var stderrR *os.File
	var stderrW *os.File
	if c.Stderr != nil {
		cmd.Stderr = c.Stderr
	} else {
		if stderrR, stderrW, err = os.Pipe(); err != nil {
			closeAll(stdinR, stdinW, stdoutR, stdoutW)
			return nil, err
		}
		cmd.Stderr = stderrW
	}
	err = cmd.Start()
	closeAll(stdinR, stdoutW, stderrW) // the child holds its own copies
	if err != nil {
		closeAll(stdinW, stdoutR, stderrR)
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	h := &handle{cmd: cmd, stdinPipe: stdinW, stdin: stdinW, stdout: &eofCloser{f: stdoutR}, done: make(chan struct{})}
	if relayPath != "" {
		h.relayed = true
		h.progKnown = make(chan struct{})
		go h.findProg()
	}
	if stderrR != nil {
		h.stderr = &eofCloser{f: stderrR}
	}
	go h.wait()
	return h, nil
}

// executable checks that path (relative to dir when it is relative, as
// the process will see it) is a file that can be executed.
func executable(path, dir string) error {
	if !filepath.IsAbs(path) && dir != "" {
		path = filepath.Join(dir, path)
	}
	_, err := exec.LookPath(path)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrPermission):
		// Not executable: the path names a file Berth may not run.
		return errclass.Reclass(err, enclosure.ErrPermission)
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, exec.ErrNotFound):
		return errclass.Reclass(err, enclosure.ErrNotFound)
	}
	return err
}

// stdoutPipeBytes is the capacity asked for a process's stdout pipe. A
// language server's answer (references on a large project, a workspace's
// symbols) runs to a hundred kilobytes and more: through the default
// 64 KiB pipe the server stops at each 64 KiB until the reader wakes and
// drains it, and every such wake of an idle process is slow on a small
// machine. Not more: the kernel counts pipe capacity against the user
// (fs.pipe-user-pages-soft, 64 MiB by default), and past that quota every
// new pipe of the user gets a minimal buffer.
const stdoutPipeBytes = 256 << 10

// growPipe asks for a larger pipe buffer, best effort: the kernel may
// give less (fs.pipe-max-size, the user's pipe quota), which only costs
// speed.
func growPipe(f *os.File, size int) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_, _, _ = syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_SETPIPE_SZ, uintptr(size))
	})
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}
