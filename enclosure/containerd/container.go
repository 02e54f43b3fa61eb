package containerd

import (
	"context"
	"fmt"
	"io"
	"net"
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
	"github.com/berth-dev/berth/enclosure/relayexec"
	"github.com/berth-dev/berth/internal/boundedio"
)

// container is one attached container: the enclosure (the relayed-exec
// core's Container, which it embeds) and containerd's side of it.
type container struct {
	*relayexec.Container
	d    *Driver
	ctr  client.Container
	task client.Task
	id   string
	spec *oci.Spec
}

var _ relayexec.Engine = (*container)(nil)

// runningTask loads the container's task and checks that it runs.
func (c *container) runningTask(ctx context.Context) (client.Task, error) {
	if e := c.d.silence.Now(); e != nil {
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
	if e := c.d.silence.Now(); e != nil {
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

// Running is nil while the container's task runs, else the error saying
// what became of it: deleted, its task stopped or paused, or a containerd
// that does not answer. It asks for the task's status alone (one call)
// while the task runs.
func (c *container) Running(ctx context.Context) error {
	c.d.ready()
	cctx, cancel := c.d.ctx(ctx)
	defer cancel()
	if err := c.running(cctx, c.task); err != nil {
		return c.failed(ctx, "checking its task", err) // says which: deleted, stopped, not answering
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

// Exec starts the relay's exec, with its stdin on a FIFO.
func (c *container) Exec(ctx context.Context, x relayexec.Exec) (relayexec.Stream, error) {
	return c.exec(ctx, execSpec{argv: x.Argv, env: x.Env, dir: x.Dir, stdin: true, stderr: x.Stderr, kept: x.Kept})
}

// Run runs argv to its end as the container's own user (relay.Runner).
func (c *container) Run(ctx context.Context, argv []string, stdin io.Reader) (relay.Result, error) {
	return c.run(ctx, nil, argv, stdin)
}

// DialPort connects to a TCP port on the container's loopback through an
// exec of "relay dial --ready", itself under "relay run" so that it ends
// when the connection is closed. The connection is up once the relay says
// so on stderr; a refused one ends the exec with the reason there.
func (c *container) DialPort(ctx context.Context, port int) (net.Conn, error) {
	d := relay.DialArgs(c.Relay, port)
	argv := relay.RunArgs(c.Relay, relay.RunOptions{}, d[0], d[1:]...)
	h, err := c.exec(ctx, execSpec{argv: argv, stdin: true})
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
	s := execSpec{argv: argv, user: user, stdin: stdin != nil}
	h, err := c.exec(ctx, s)
	if err != nil {
		return relay.Result{}, err
	}
	stop := context.AfterFunc(ctx, h.kill)
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
