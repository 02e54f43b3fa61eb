package containerd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	pathpkg "path"
	"slices"
	"strings"
	"sync"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/oci"
	cerrdefs "github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/mounts"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/internal/boundedio"
)

// container is one attached container: the enclosure and its state.
type container struct {
	d      *Driver
	ctr    client.Container
	task   client.Task
	id     string
	spec   *oci.Spec
	relay  string       // the relay's path inside
	mounts mounts.Table // host paths -> the container's
	self   mounts.Table // host paths -> Berth's own; nil: the same
	// sockets is how stdin and stdout travel.
	sockets *relay.Sockets

	found sync.Map // LookPath's answers: name -> path
}

var _ enclosure.Enclosure = (*container)(nil)

func (c *container) Driver() string { return Name }

// Capabilities are a container's: nothing shared but its mounts.
func (*container) Capabilities() enclosure.Capabilities { return enclosure.Capabilities{} }

func (c *container) ID() string { return c.id }

// runningTask loads the container's task and checks that it runs.
func (c *container) runningTask(ctx context.Context) (client.Task, error) {
	if e := c.d.silentNow(); e != nil {
		return nil, e
	}
	t, err := c.ctr.Task(ctx, nil)
	if cerrdefs.IsNotFound(err) {
		return nil, c.d.notRunning(c.id, "no task")
	}
	if err != nil {
		return nil, c.d.unavailable(err)
	}
	if err := c.running(ctx, t); err != nil {
		return nil, err
	}
	return t, nil
}

// running checks that the task runs, with one call (its status).
func (c *container) running(ctx context.Context, t client.Task) error {
	st, err := t.Status(ctx)
	if cerrdefs.IsNotFound(err) {
		return c.d.notRunning(c.id, "no task")
	}
	if err != nil {
		return c.d.unavailable(err)
	}
	if st.Status == client.Paused || st.Status == client.Pausing {
		return c.d.paused(c.id)
	}
	if st.Status != client.Running {
		state := "a task that is " + string(st.Status)
		if st.Status == client.Stopped {
			state += fmt.Sprintf(" (exit code %d)", st.ExitStatus)
		}
		return c.d.notRunning(c.id, state)
	}
	return nil
}

// failed explains an error of a call on the container: its task stopped,
// the container is gone, or containerd did not answer.
func (c *container) failed(ctx context.Context, what string, err error) error {
	if e := c.d.silentNow(); e != nil {
		return fmt.Errorf("containerd container %s: %s: %w", c.id, what, e)
	}
	if err != nil && (isUnavailable(err) || strings.Contains(err.Error(), context.DeadlineExceeded.Error())) {
		// containerd's call timed out (apiTimeout bounds each): asking
		// it again would wait as long.
		return fmt.Errorf("containerd container %s: %s: %w", c.id, what, c.d.unavailable(err))
	}
	cctx, cancel := c.d.ctx(context.WithoutCancel(ctx))
	defer cancel()
	if _, lerr := c.d.cli.LoadContainer(cctx, c.id); cerrdefs.IsNotFound(lerr) {
		return fmt.Errorf("containerd container %s no longer exists: it was deleted; Berth never creates one: start a new run with a running container: %w", c.id, enclosure.ErrGone)
	} else if lerr != nil {
		return fmt.Errorf("containerd container %s: %s: %w", c.id, what, c.d.unavailable(lerr))
	}
	if _, terr := c.runningTask(cctx); terr != nil {
		return terr
	}
	return fmt.Errorf("containerd container %s: %s: %w", c.id, what, err)
}

// Check is nil while the container's task runs, else the error saying
// what became of it: deleted, its task stopped or paused, or a containerd
// that does not answer.
func (c *container) Check(ctx context.Context) error {
	if err := c.failed(ctx, "checking its task", nil); enclosure.Down(err) {
		return err
	}
	return nil
}

// mountTable is the container's mounts from its OCI spec: bind mounts by
// their host paths; every other mount (proc, a tmpfs, ...) has no host
// path but hides what lies beneath it.
func mountTable(ms []specs.Mount) mounts.Table {
	var t mounts.Table
	for _, m := range ms {
		src := ""
		if isBind(m) {
			src = m.Source
		}
		t = append(t, mounts.Mount{Source: src, Destination: m.Destination, ReadOnly: slices.Contains(m.Options, "ro")})
	}
	return t
}

func isBind(m specs.Mount) bool {
	if m.Type == "bind" || m.Type == "rbind" {
		return true
	}
	for _, o := range m.Options {
		if o == "bind" || o == "rbind" {
			return true
		}
	}
	return false
}

// MapPath turns a path as Berth sees it into the path the container's
// processes see: through enclosure.path_map to the host's path, then
// through the container's mounts.
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
	return mounts.Crossing{Self: c.self, Container: c.mounts, Name: "containerd container " + c.id, Mount: "ctr run --mount type=bind,src=%s,dst=/workspace,options=rbind:rw ..."}
}

// LookPath asks the relay which executable name is on the container's
// PATH (its process spec's, as every exec gets it). An answer is kept,
// but only given while the task runs: its status is one call, where the
// relay's which is an exec.
func (c *container) LookPath(ctx context.Context, name string) (string, error) {
	if p, ok := c.found.Load(name); ok {
		c.d.ready()
		cctx, cancel := c.d.ctx(ctx)
		defer cancel()
		if err := c.running(cctx, c.task); err != nil {
			return "", c.failed(ctx, "which "+name, err) // says which: deleted, stopped, not answering
		}
		return p.(string), nil
	}
	asOwn := func(ctx context.Context, argv []string, stdin io.Reader) (relay.Result, error) {
		return c.run(ctx, nil, argv, stdin)
	}
	p, err := relay.Which(ctx, asOwn, c.relay, name, "containerd container "+c.id)
	if err != nil {
		return "", err
	}
	c.found.Store(name, p)
	return p, nil
}

// Start runs cmd under the relay in an exec: stdin framed (closing it
// closes the program's stdin; closing the FIFO ends the run), stderr on
// a FIFO of its own. stdin and stdout go through a socket in cmd.Dir
// where Berth sees that directory too (containerd.stdio: socket), else
// on FIFOs as well.
func (c *container) Start(ctx context.Context, cmd enclosure.Cmd) (enclosure.Process, error) {
	path := cmd.Path
	if !strings.Contains(path, "/") {
		p, err := c.LookPath(ctx, path)
		if err != nil {
			return nil, err
		}
		path = p
	}
	if l := c.sockets.Listen(cmd.Dir, relay.NewTag(), c.HostPath); l != nil {
		p, err := c.startSocket(ctx, path, cmd, l)
		if !errors.Is(err, relay.ErrNotConnected) {
			return p, err
		}
	}
	argv := relay.RunArgs(c.relay, relay.RunOptions{Stdin: relay.StdinFramed}, path, cmd.Args...)
	return c.exec(ctx, execSpec{argv: argv, env: cmd.Env, dir: cmd.Dir, stdin: stdinFramed, stderr: cmd.Stderr})
}

// startSocket starts the relay's exec with stdio through l. It returns an
// error wrapping relay.ErrNotConnected when the relay ended without
// connecting to l.
func (c *container) startSocket(ctx context.Context, path string, cmd enclosure.Cmd, l *relay.StdioListener) (enclosure.Process, error) {
	defer l.Close()
	argv := relay.RunArgs(c.relay, relay.RunOptions{Stdin: relay.StdinFramed, Connect: pathpkg.Join(cmd.Dir, l.Name)}, path, cmd.Args...)
	h, err := c.exec(ctx, execSpec{argv: argv, env: cmd.Env, dir: cmd.Dir, stdin: stdinFramed, stderr: cmd.Stderr})
	if err != nil {
		return nil, err
	}
	// The socket's token goes first on the relay's stdin, before any
	// frame: in the exec's environment, every process in the container
	// could read it (issue 24 item 3).
	if _, err := io.WriteString(h.stdinW, l.TokenLine()); err != nil {
		_ = h.Kill()
		return nil, fmt.Errorf("containerd container %s: starting %s in %q: the relay's stdin: %w", c.id, path, cmd.Dir, err)
	}
	// containerd's pid of the exec is the host's: where Berth sees the
	// same, only the relay may connect.
	conn, err := c.sockets.Accept(ctx, l, h.Pid(), h.exited, h.Wait)
	if err != nil {
		if !errors.Is(err, relay.ErrNotConnected) {
			_ = h.Kill()
			err = fmt.Errorf("containerd container %s: starting %s in %q: %w", c.id, path, cmd.Dir, err)
		}
		return nil, err
	}
	h.conn = conn
	h.stdin = relay.SocketStdin(conn)
	return h, nil
}

// Dial connects to a TCP port on the container's loopback through an exec
// of "relay dial --ready", itself under "relay run" so that it ends when
// the connection is closed. The connection is up once the relay says so
// on stderr; a refused one ends the exec with the reason there.
func (c *container) Dial(ctx context.Context, port int) (net.Conn, error) {
	if err := enclosure.CheckPort(port); err != nil {
		return nil, err
	}
	d := relay.DialArgs(c.relay, port)
	argv := relay.RunArgs(c.relay, relay.RunOptions{}, d[0], d[1:]...)
	h, err := c.exec(ctx, execSpec{argv: argv, stdin: stdinRaw})
	if err != nil {
		return nil, err
	}
	return dialConn(ctx, h, fmt.Sprintf("127.0.0.1:%d in containerd container %s", port, c.id))
}

// run runs argv to its end (the relay's short modes, the relay's own
// installation), as user (nil: the container's own), with stdin written
// and closed first when given.
func (c *container) run(ctx context.Context, user *specs.User, argv []string, stdin io.Reader) (relay.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	s := execSpec{argv: argv, user: user}
	if stdin != nil {
		s.stdin = stdinRaw
	}
	h, err := c.exec(ctx, s)
	if err != nil {
		return relay.Result{}, err
	}
	stop := context.AfterFunc(ctx, func() { _ = h.Kill() })
	defer stop()
	if stdin != nil {
		go func() {
			// A command that exits without reading all of stdin fails
			// this copy; its exit code tells what happened.
			_, _ = io.Copy(h.stdinW, stdin)
			_ = h.stdinW.Close()
		}()
	}
	out, errOut := boundedio.Buffer{Max: relay.MaxOutput}, boundedio.Buffer{Max: relay.MaxOutput}
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = io.Copy(&errOut, h.Stderr()) })
	_, _ = io.Copy(&out, h.Stdout())
	wg.Wait()
	code, err := h.Wait()
	if err != nil {
		return relay.Result{}, err
	}
	if ctx.Err() != nil {
		return relay.Result{}, fmt.Errorf("containerd container %s: %s %s: %w", c.id, argv[0], argv[1], ctx.Err())
	}
	return relay.Result{Stdout: out.String(), Stderr: errOut.String(), Code: code}, nil
}

// asRoot runs argv to its end as root: the relay's installation.
func (c *container) asRoot(ctx context.Context, argv []string, stdin io.Reader) (relay.Result, error) {
	return c.run(ctx, &specs.User{UID: 0, GID: 0}, argv, stdin)
}
