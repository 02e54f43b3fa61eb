package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	pathpkg "path"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/mounts"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/internal/boundedio"
)

// container is one attached container: the enclosure and its state.
type container struct {
	cli      *client.Client
	id, name string
	user     string
	relay    string       // the relay's path inside
	relayHow string       // how it got there (baked, copied, streamed)
	mounts   mounts.Table // host paths -> the container's
	self     mounts.Table // host paths -> Berth's own; nil: the same
	dial     string
	sockets  *relay.Sockets // how stdin and stdout travel

	found sync.Map // LookPath's answers: name -> path

	// lost holds the relay tags of processes whose end the engine could
	// not confirm (it went away under them). With --live-restore the
	// container and those processes live on, and the shim keeps their
	// stdin open, so the relay never reads EOF: they are killed by tag
	// at the next exec, once the engine answers again.
	lostMu sync.Mutex
	lost   []string

	// silent is the engine's last failure to answer, kept for
	// silentMemory: the calls of that moment (a LookPath per server, the
	// check that explains a failed call) say so at once rather than each
	// wait apiTimeout again.
	silentMu sync.Mutex
	silent   error
	silentAt time.Time
}

// silentMemory is how long an engine that did not answer is taken not
// to answer without asking it again.
const silentMemory = 5 * time.Second

// silentNow is the engine's recent failure to answer, or nil.
func (c *container) silentNow() error {
	c.silentMu.Lock()
	defer c.silentMu.Unlock()
	if c.silent != nil && time.Since(c.silentAt) < silentMemory {
		return c.silent
	}
	return nil
}

// unanswered is the error for an engine that did not answer what, and
// remembers it.
func (c *container) unanswered(what string, err error) error {
	why := err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		why = fmt.Sprintf("no answer within %s", apiTimeout)
	}
	if what != "" {
		what += ": "
	}
	e := fmt.Errorf("docker container %s: %sthe engine at %s did not answer (%s): check that the engine runs and answers there (docker info), then call again: %w", c.name, what, c.cli.DaemonHost(), why, enclosure.ErrUnavailable)
	// Only an engine that kept a call waiting is remembered: one that
	// refused the connection (dockerd stopped, its socket gone) says so
	// at once, and may be back for the very next call.
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		c.silentMu.Lock()
		c.silent, c.silentAt = e, time.Now()
		c.silentMu.Unlock()
	}
	return e
}

var _ enclosure.Enclosure = (*container)(nil)

func (c *container) Driver() string { return Name }

// Capabilities are a container's: nothing shared but its mounts.
func (*container) Capabilities() enclosure.Capabilities { return enclosure.Capabilities{} }

func (c *container) ID() string { return c.id }

// MapPath turns a path as Berth sees it into the path the container's
// processes see: through Berth's own mounts (or enclosure.path_map) to
// the host's path, then through the container's mounts.
func (c *container) MapPath(berthPath string) (string, error) {
	return c.crossing().Inside(berthPath)
}

// HostPath is MapPath's inverse.
func (c *container) HostPath(enclosedPath string) (string, error) {
	return c.crossing().Outside(enclosedPath)
}

// Writable refuses a path on a mount the container has read-only.
func (c *container) Writable(berthPath string) error { return c.crossing().Writable(berthPath) }

func (c *container) crossing() mounts.Crossing {
	return mounts.Crossing{Self: c.self, Container: c.mounts, Name: "docker container " + c.name, Mount: "docker run -v %s:/workspace ..."}
}

// LookPath asks the relay which executable name is on the container's
// PATH (its own environment's, as every exec gets it). A path found is
// kept for the container's next starts; should the program go away,
// the relay's start of it fails (exit 127) and says so on stderr.
func (c *container) LookPath(ctx context.Context, name string) (string, error) {
	if p, ok := c.found.Load(name); ok {
		// A kept answer still says so when the container stopped.
		if err := c.running(ctx); err != nil {
			return "", err
		}
		return p.(string), nil
	}
	p, err := relay.Which(ctx, c.run, c.relay, name, "docker container "+c.name)
	if err != nil {
		return "", err
	}
	c.found.Store(name, p)
	return p, nil
}

// Start runs cmd under the relay in an exec: the relay's stdin framed
// (dropping the connection ends the run), stderr in the exec's stream.
// stdin and stdout go through a socket in cmd.Dir where Berth sees that
// directory too (docker.stdio: socket), else in the exec's stream as
// well: closing stdin closes the program's stdin either way.
func (c *container) Start(ctx context.Context, cmd enclosure.Cmd) (enclosure.Process, error) {
	path := cmd.Path
	if !strings.Contains(path, "/") {
		p, err := c.LookPath(ctx, path)
		if err != nil {
			return nil, err
		}
		path = p
	}
	tag := relay.NewTag()
	if l := c.sockets.Listen(cmd.Dir, tag, c.HostPath); l != nil {
		p, err := c.start(ctx, path, tag, cmd, l)
		if !errors.Is(err, relay.ErrNotConnected) {
			return p, err
		}
	}
	return c.start(ctx, path, tag, cmd, nil)
}

// start starts the relay's exec, with stdio through l when given. It
// returns an error wrapping relay.ErrNotConnected when the relay ended
// without connecting to l.
func (c *container) start(ctx context.Context, path, tag string, cmd enclosure.Cmd, l *relay.StdioListener) (enclosure.Process, error) {
	opts := relay.RunOptions{Stdin: relay.StdinFramed, Tag: tag}
	if l != nil {
		defer l.Close()
		opts.Connect = pathpkg.Join(cmd.Dir, l.Name)
	}
	argv := relay.RunArgs(c.relay, opts, path, cmd.Args...)
	execID, hj, err := c.exec(ctx, argv, cmd.Env, cmd.Dir, true)
	if err != nil {
		return nil, err
	}
	pid, err := c.started(ctx, execID, hj)
	if err == nil && l != nil {
		// The socket's token goes first on the relay's stdin, before
		// any frame: in the exec's environment, every process in the
		// container could read it (issue 24 item 3).
		_, err = io.WriteString(hj.Conn, l.TokenLine())
	}
	if err != nil {
		hj.Close()
		return nil, fmt.Errorf("docker container %s: starting %s in %q: %w", c.name, path, cmd.Dir, err)
	}
	h := newHandle(c, execID, tag, hj, cmd.Stderr, l != nil)
	h.pid = pid
	if l == nil {
		return h, nil
	}
	// The exit code of a relay that did not connect is read only once
	// the handle knows it has no socket.
	conn, err := c.sockets.Accept(ctx, l, pid, h.streamEnded, func() (int, error) {
		h.attach(nil)
		return h.Wait()
	})
	h.attach(conn)
	if err != nil {
		if !errors.Is(err, relay.ErrNotConnected) {
			_ = h.Kill()
			err = fmt.Errorf("docker container %s: starting %s in %q: %w", c.name, path, cmd.Dir, err)
		}
		return nil, err
	}
	return h, nil
}

// started waits until the engine has started the exec, or failed to (a
// working directory that does not exist in the container): the engine
// answers the attach before it starts the process, and reports such a
// failure only as text in the process's stdout and exit code 126, which
// a caller would take for the program's own. A started exec has a pid,
// whether it still runs or not; one that failed to start has none and an
// exit code. It returns that pid (the host's), which the handle reports.
func (c *container) started(ctx context.Context, execID string, hj client.HijackedResponse) (int, error) {
	wait := time.Millisecond
	for {
		res, err := c.cli.ExecInspect(ctx, execID, client.ExecInspectOptions{})
		if err != nil {
			return 0, c.failed(ctx, "exec inspect", err)
		}
		if res.PID != 0 {
			return res.PID, nil
		}
		if !res.Running && res.ExitCode != 0 {
			var out bytes.Buffer
			_, _ = stdcopy.StdCopy(&out, &out, io.LimitReader(hj.Reader, 4096))
			return 0, &execRefused{code: res.ExitCode, msg: strings.TrimSpace(out.String())}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 20*time.Millisecond)
	}
}

// execRefused is an exec the engine could not start (a working
// directory that does not exist, or that lies outside the container's
// mount namespace): its exit code and the engine's own words, which
// Docker gives only as the exec's output.
type execRefused struct {
	code int
	msg  string
}

func (e *execRefused) Error() string {
	return fmt.Sprintf("the engine could not start it (exit %d): %s (check that the working directory exists in the container, under its mounts, and the program is there; then call again)", e.code, e.msg)
}

// Dial connects to a TCP port on the container's loopback.
func (c *container) Dial(ctx context.Context, port int) (net.Conn, error) {
	if err := enclosure.CheckPort(port); err != nil {
		return nil, err
	}
	if c.dial == DialNetns {
		return c.dialNetns(ctx, port)
	}
	return c.dialRelay(ctx, port)
}

// exec creates an exec of argv, with stdin attached when stdin is set,
// and attaches to its streams. ctx bounds the start only.
func (c *container) exec(ctx context.Context, argv, env []string, dir string, stdin bool) (string, client.HijackedResponse, error) {
	return c.execAs(ctx, c.user, argv, env, dir, stdin)
}

func (c *container) execAs(ctx context.Context, user string, argv, env []string, dir string, stdin bool) (string, client.HijackedResponse, error) {
	if e := c.silentNow(); e != nil {
		return "", client.HijackedResponse{}, e
	}
	c.killLost(ctx)
	cctx, cancel := context.WithTimeout(ctx, apiTimeout)
	created, err := c.cli.ExecCreate(cctx, c.id, client.ExecCreateOptions{
		User: user, AttachStdin: stdin, AttachStdout: true, AttachStderr: true,
		Env: env, WorkingDir: dir, Cmd: argv,
	})
	cancel()
	if err != nil {
		return "", client.HijackedResponse{}, c.failed(ctx, "exec "+argv[0], err)
	}
	att, err := c.cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return "", client.HijackedResponse{}, c.failed(ctx, "exec "+argv[0], err)
	}
	return created.ID, att.HijackedResponse, nil
}

// gone is the error saying the container no longer runs (stopped or
// removed); nil while it runs, or when the engine does not answer. It
// looks for up to goneWait: the engine reports the end of an exec that a
// stop killed before the stop of the container itself.
func (c *container) gone(ctx context.Context) error {
	deadline := time.Now().Add(goneWait)
	for {
		if err := c.failed(ctx, "", nil); errors.Is(err, enclosure.ErrNotFound) {
			return err
		}
		if time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// goneWait bounds gone's look at a container that may be stopping.
const goneWait = time.Second

// failed explains an error of a call on the container: it stopped, it
// is gone, or the engine did not answer.
func (c *container) failed(ctx context.Context, what string, err error) error {
	if e := c.silentNow(); e != nil {
		return e
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// The engine's call timed out (apiTimeout bounds each): asking
		// it again would wait as long.
		return c.unanswered(what, err)
	}
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), apiTimeout)
	defer cancel()
	res, ierr := c.cli.ContainerInspect(ictx, c.id, client.ContainerInspectOptions{})
	switch {
	case cerrdefs.IsNotFound(ierr):
		return fmt.Errorf("docker container %s (%.12s) no longer exists: it was removed; Berth never creates one: start a new run with a running container: %w", c.name, c.id, enclosure.ErrGone)
	case ierr != nil:
		return c.unanswered(what, ierr)
	case res.Container.State != nil:
		if nerr := notRunning(res.Container); nerr != nil {
			return nerr
		}
	}
	return fmt.Errorf("docker container %s: %s: %w", c.name, what, err)
}

// Check is nil while the container runs, else the error saying what
// became of it: stopped, removed, paused, or an engine that does not
// answer.
func (c *container) Check(ctx context.Context) error { return c.running(ctx) }

// running is nil while the container runs, else the error saying what
// became of it.
func (c *container) running(ctx context.Context) error {
	if e := c.silentNow(); e != nil {
		return e
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	res, err := c.cli.ContainerInspect(ctx, c.id, client.ContainerInspectOptions{})
	if err != nil || res.Container.State == nil {
		return c.failed(ctx, "inspect", err)
	}
	return notRunning(res.Container)
}

// run runs argv to its end (the relay's short modes, the relay's own
// installation), with stdin written and closed first when given.
func (c *container) run(ctx context.Context, argv []string, stdin io.Reader) (relay.Result, error) {
	return c.runAs(ctx, c.user, argv, stdin)
}

func (c *container) runAs(ctx context.Context, user string, argv []string, stdin io.Reader) (relay.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	id, hj, err := c.execAs(ctx, user, argv, nil, "", stdin != nil)
	if err != nil {
		return relay.Result{}, err
	}
	defer hj.Close()
	stop := context.AfterFunc(ctx, hj.Close)
	defer stop()
	if stdin != nil {
		go func() {
			// A command that exits without reading all of stdin fails
			// this copy; its exit code tells what happened.
			_, _ = io.Copy(hj.Conn, stdin)
			_ = hj.CloseWrite()
		}()
	}
	out, errOut := boundedio.Buffer{Max: relay.MaxOutput}, boundedio.Buffer{Max: relay.MaxOutput}
	if _, err := stdcopy.StdCopy(&out, &errOut, hj.Reader); err != nil && ctx.Err() == nil {
		return relay.Result{}, c.failed(ctx, what(argv), err)
	}
	code, pid, err := c.exitStatus(ctx, id)
	if err != nil {
		return relay.Result{}, c.failed(ctx, what(argv), err)
	}
	if pid == 0 && code != 0 {
		// The engine never started it: its reason, which Docker writes
		// as the exec's output, is the error, not an exit code that
		// would read as the command's own.
		if err := c.running(ctx); err != nil {
			return relay.Result{}, err
		}
		return relay.Result{}, fmt.Errorf("docker container %s: %s: %w", c.name, what(argv),
			&execRefused{code: code, msg: strings.TrimSpace(out.String() + errOut.String())})
	}
	return relay.Result{Stdout: out.String(), Stderr: errOut.String(), Code: code}, nil
}

// lose records a process whose end the engine could not confirm.
func (c *container) lose(tag string) {
	c.lostMu.Lock()
	c.lost = append(c.lost, tag)
	c.lostMu.Unlock()
}

// killLost kills the lost processes by their relay tags; a tag whose
// kill the engine did not carry out is kept for the next exec. The list
// is taken first, so the kills' own execs do not come back here.
func (c *container) killLost(ctx context.Context) {
	c.lostMu.Lock()
	tags := c.lost
	c.lost = nil
	c.lostMu.Unlock()
	for i, tag := range tags {
		// A relay that ended already makes signal exit non-zero: nothing
		// is left to kill then, which is as good.
		if _, err := c.run(ctx, relay.SignalArgs(c.relay, tag, "KILL"), nil); err != nil {
			// The engine still does not answer: keep this tag and the rest.
			c.lostMu.Lock()
			c.lost = append(c.lost, tags[i:]...)
			c.lostMu.Unlock()
			return
		}
	}
}

// what names a command in errors: its program and mode.
func what(argv []string) string { return strings.Join(argv[:min(2, len(argv))], " ") }

// exitCode waits for the exec to end and returns its exit code. The
// engine marks an exec ended a moment after its streams close, so it
// is asked again, more slowly each time, until it says so.
func (c *container) exitCode(ctx context.Context, execID string) (int, error) {
	code, _, err := c.exitStatus(ctx, execID)
	return code, err
}

// exitStatus is exitCode with the exec's pid, 0 when the engine never
// started it.
func (c *container) exitStatus(ctx context.Context, execID string) (int, int, error) {
	wait := time.Millisecond
	for {
		res, err := c.cli.ExecInspect(ctx, execID, client.ExecInspectOptions{})
		if err != nil {
			return -1, 0, err
		}
		if !res.Running {
			return res.ExitCode, res.PID, nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return -1, 0, fmt.Errorf("the exec still runs: %w", ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}
