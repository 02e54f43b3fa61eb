package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relayexec"
	"github.com/berth-dev/berth/internal/boundedio"
)

// container is one attached container: the enclosure (the relayed-exec
// core's Container, which it embeds) and the engine's side of it.
type container struct {
	*relayexec.Container
	cli      *client.Client
	id, name string
	user     string

	// lost holds the relay tags of processes whose end the engine could
	// not confirm (it went away under them). With --live-restore the
	// container and those processes live on, and the shim keeps their
	// stdin open, so the relay never reads EOF: they are killed by tag
	// at the next exec, once the engine answers again.
	lostMu sync.Mutex
	lost   []string

	silence relayexec.Silence // the engine's last failure to answer
}

var _ relayexec.Engine = (*container)(nil)

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
	// Only an engine that kept a call waiting is remembered.
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		c.silence.Remember(e)
	}
	return e
}

// Exec starts the relay's exec, with stdin attached, and waits until
// the engine has started it (started).
func (c *container) Exec(ctx context.Context, x relayexec.Exec) (relayexec.Stream, error) {
	execID, hj, err := c.exec(ctx, x.Argv, x.Env, x.Dir, true)
	if err != nil {
		return nil, err
	}
	pid, err := c.started(ctx, execID, hj)
	if err != nil {
		hj.Close()
		return nil, fmt.Errorf("docker container %s: starting %s in %q: %w", c.name, x.Program, x.Dir, err)
	}
	return relayexec.NewPiped(x, writeCloser{hj}, pid, relayexec.PipedFuncs{
		Copy: func(stdout, stderr io.Writer) error {
			_, err := stdcopy.StdCopy(stdout, stderr, hj.Reader)
			hj.Close()
			return err
		},
		Exit: func(copyErr error) (int, error) {
			ctx, cancel := context.WithTimeout(context.Background(), exitWait)
			defer cancel()
			code, err := c.exitCode(ctx, execID)
			if err != nil {
				// Whether it still runs is unknown: kill it by its tag
				// once the engine answers again.
				c.lose(x.Tag)
				return -1, c.failed(ctx, "the process's exit code", err)
			}
			if copyErr != nil {
				return code, fmt.Errorf("docker container %s: the process's output stream broke: %v", c.name, copyErr)
			}
			return code, nil
		},
		// Dropping the connection ends the run (the relay reads its
		// stdin's EOF) and the stream, even when the engine is gone.
		Drop: func() { hj.Close() },
	}), nil
}

// exitWait bounds the wait for the engine to mark the exec ended once
// its stream closed: the relay's grace and its SIGKILL, with room.
const exitWait = 30 * time.Second

// writeCloser is the relay's raw stdin on the exec's connection: Close
// half-closes it, and the relay reads EOF.
type writeCloser struct{ hj client.HijackedResponse }

func (w writeCloser) Write(b []byte) (int, error) { return w.hj.Conn.Write(b) }
func (w writeCloser) Close() error                { return w.hj.CloseWrite() }

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

// DialPort connects to a TCP port on the container's loopback through
// the relay.
func (c *container) DialPort(ctx context.Context, port int) (net.Conn, error) {
	return c.dialRelay(ctx, port)
}

// exec creates an exec of argv, with stdin attached when stdin is set,
// and attaches to its streams. ctx bounds the start only.
func (c *container) exec(ctx context.Context, argv, env []string, dir string, stdin bool) (string, client.HijackedResponse, error) {
	return c.execAs(ctx, c.user, argv, env, dir, stdin)
}

func (c *container) execAs(ctx context.Context, user string, argv, env []string, dir string, stdin bool) (string, client.HijackedResponse, error) {
	if e := c.silence.Now(); e != nil {
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
	if e := c.silence.Now(); e != nil {
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

// Running is nil while the container runs, else the error saying what
// became of it: stopped, removed, paused, or an engine that does not
// answer.
func (c *container) Running(ctx context.Context) error { return c.running(ctx) }

// Gone is the error saying the container no longer runs (gone).
func (c *container) Gone(ctx context.Context) error { return c.gone(ctx) }

// Run runs argv to its end as the container's user (relay.Runner).
func (c *container) Run(ctx context.Context, argv []string, stdin io.Reader) (relay.Result, error) {
	return c.run(ctx, argv, stdin)
}

// running is nil while the container runs, else the error saying what
// became of it.
func (c *container) running(ctx context.Context) error {
	if e := c.silence.Now(); e != nil {
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
		if _, err := c.run(ctx, relay.SignalArgs(c.Relay, tag, "KILL"), nil); err != nil {
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
