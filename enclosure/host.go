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
// own process group so Kill reaches everything it started, and with a
// parent-death signal so none outlives Berth.
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
	cmd.Env = append(os.Environ(), c.Env...)
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

func closeAll(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}
