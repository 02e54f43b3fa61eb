package enclosure

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
)

// HostID is the ID of the host enclosure.
const HostID = "local"

type hostDriver struct{}

var _ Enclosure = hostDriver{}

// Host is the host fallback enclosure: processes run directly, each in its
// own process group so Kill reaches everything it started, with a
// parent-death signal so none outlives Berth, and with Berth's
// environment less its secrets (SecretEnv, DropEnv).
func Host() Enclosure { return hostDriver{} }

func (hostDriver) Driver() string { return "host" }
func (hostDriver) ID() string     { return HostID }

func (hostDriver) LookPath(_ context.Context, name string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s: executable not found on the host's PATH: %w", name, ErrNotFound)
	}
	return p, nil
}

func (hostDriver) Dial(ctx context.Context, port int) (net.Conn, error) {
	if port <= 0 || port > 65535 {
		return nil, fmt.Errorf("port %d out of range 1-65535: %w", port, ErrInvalidConfig)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
}

func (hostDriver) MapPath(hostPath string) (string, error) { return filepath.Clean(hostPath), nil }

func (d hostDriver) Start(ctx context.Context, c Cmd) (Process, error) {
	path := c.Path
	if filepath.Base(path) == path {
		p, err := d.LookPath(ctx, path)
		if err != nil {
			return nil, err
		}
		path = p
	}
	cmd := exec.Command(path, c.Args...)
	cmd.Dir = c.Dir
	cmd.Env = hostEnv(c.Env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
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
	h := &hostHandle{cmd: cmd, stdin: stdinW, stdout: &eofCloser{f: stdoutR}, done: make(chan struct{})}
	if stderrR != nil {
		h.stderr = &eofCloser{f: stderrR}
	}
	go h.wait()
	return h, nil
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

func (hostDriver) HostPath(enclosedPath string) (string, error) {
	return filepath.Clean(enclosedPath), nil
}
