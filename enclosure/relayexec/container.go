// Package relayexec is the relayed-exec core the container drivers
// (enclosure/docker, enclosure/containerd, enclosure/kubernetes) share:
// one attached container as an enclosure (Container), one process as a
// handle (its Signal, Kill, Wait and the kill grace), the start sequence
// (resolve the program with LookPath and its cache, offer a stdio socket,
// fall back to the exec's stream), and the relay's installation order
// (Installer). A driver supplies only what its engine does differently,
// behind Engine: start an exec with given streams, run a command to its
// end, say whether the container still runs (and whether it is gone), and
// reach a port. Optional abilities are small interfaces an engine may
// implement (ArchiveCopier, NetnsDialer, Signaller). It imports no driver.
package relayexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	pathpkg "path"
	"strings"
	"sync"
	"syscall"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/mounts"
	"github.com/berth-dev/berth/enclosure/relay"
)

// Engine is what a container driver supplies for one attached container.
type Engine interface {
	// Exec starts an exec of x.Argv (the relay's command line) in the
	// container and returns its stream. ctx bounds the start only.
	Exec(ctx context.Context, x Exec) (Stream, error)
	// Run runs argv to its end, as the container's own user, with stdin
	// written and closed first when given (relay.Runner): the relay's
	// short modes (which, signal).
	Run(ctx context.Context, argv []string, stdin io.Reader) (relay.Result, error)
	// Running is nil while the container runs; else the error saying
	// what became of it (stopped, removed, paused: enclosure.Down), or
	// that its engine did not answer.
	Running(ctx context.Context) error
	// Gone is the error saying the container no longer runs (stopped or
	// removed), for a process a signal Berth did not send ended; nil
	// while it runs, or when its engine does not answer.
	Gone(ctx context.Context) error
	// DialPort connects to a TCP port on the container's loopback (port
	// already checked).
	DialPort(ctx context.Context, port int) (net.Conn, error)
}

// NetnsDialer is an engine that can also reach a port by entering the
// container's network namespace from Berth's side (Docker's dial:
// netns); Container.Netns picks it.
type NetnsDialer interface {
	DialNetns(ctx context.Context, port int) (net.Conn, error)
}

// Exec is one exec a Container asks its engine for.
type Exec struct {
	Argv    []string // the relay's command line
	Program string   // the program it runs, for errors
	// Env and Dir are for the engine's exec; empty where the relay sets
	// them (Container.RelaySetsDirEnv).
	Env []string
	Dir string
	Tag string // the relay's tag (relay signal finds the process by it)
	// Stderr, when set, takes the exec's stderr: Stream.Stderr is nil.
	Stderr io.Writer
	// Socket says the program's stdin and stdout go through a stdio
	// socket: the exec's stdout carries nothing.
	Socket bool
	// Kept says the relay holds its program when Berth goes away
	// (Cmd.Keep): a driver that ends what a dead Berth left (containerd's
	// sweep) leaves the exec to its relay while it runs.
	Kept bool
}

// Stream is one exec as its engine carries it.
type Stream interface {
	// Pid is the relay's pid as Berth sees it (0: unknown).
	Pid() int
	// Stdin is the relay's raw stdin; its close is EOF.
	Stdin() io.WriteCloser
	Stdout() io.Reader
	// Stderr is nil when Exec.Stderr was set.
	Stderr() io.Reader
	// Ended is closed once the exec's stream has ended (its exit code may
	// not be known yet).
	Ended() <-chan struct{}
	// Wait waits for the exec's end and returns the relay's exit code,
	// or the error (already explained: the container stopped, the engine
	// did not answer) when its end is not known.
	Wait() (int, error)
	// Drop is Kill's last step: Berth lets go of the exec (its stdin's
	// EOF ends the relay's run), so that Ended closes even when the
	// engine no longer answers.
	Drop()
}

// Signaller is a stream whose engine signals the exec'd relay itself
// (containerd): no second exec carries a signal.
type Signaller interface {
	Signal(ctx context.Context, sig syscall.Signal) error
}

// Container is one attached container as an enclosure. A driver's
// container type embeds it and is its Engine.
type Container struct {
	Engine Engine
	Name   string // the driver's name
	Id     string // what Attach takes back
	// Where names the container in errors ("docker container web").
	Where string
	// Relay is the relay's path inside, and RelayHow how it got there.
	Relay, RelayHow string
	// Paths is the way between Berth's paths and the container's.
	Paths mounts.Crossing
	// Sockets is how stdin and stdout travel.
	Sockets *relay.Sockets
	// RelaySetsDirEnv: the engine's exec takes no working directory or
	// environment (the Kubernetes exec API): the relay sets them.
	RelaySetsDirEnv bool
	// Netns: Dial enters the container's network namespace (the engine
	// must be a NetnsDialer).
	Netns bool
	// User is who the engine runs processes as, when the driver sets
	// one; "" for the container's own user (Capabilities).
	User string

	found sync.Map // LookPath's answers: name -> path
}

var _ enclosure.Enclosure = (*Container)(nil)
var _ enclosure.Checker = (*Container)(nil)

func (c *Container) Driver() string { return c.Name }
func (c *Container) ID() string     { return c.Id }

// Capabilities are a container's: nothing shared with Berth but its
// mounts; its processes run as User under the relay at Relay.
func (c *Container) Capabilities() enclosure.Capabilities {
	return enclosure.Capabilities{User: c.User, Relay: c.Relay}
}

// MapPath turns a path as Berth sees it into the path the container's
// processes see.
func (c *Container) MapPath(berthPath string) (string, error) { return c.Paths.Inside(berthPath) }

// HostPath is MapPath's inverse.
func (c *Container) HostPath(enclosedPath string) (string, error) {
	return c.Paths.Outside(enclosedPath)
}

// Writable refuses a path on a mount the container has read-only.
func (c *Container) Writable(berthPath string) error { return c.Paths.Writable(berthPath) }

// Check is nil while the container runs, else the error saying what
// became of it, or that its engine does not answer.
func (c *Container) Check(ctx context.Context) error { return c.Engine.Running(ctx) }

// LookPath asks the relay which executable name is on the container's
// PATH (its own environment's, as every exec gets it). A path found is
// kept for the container's next starts, but given only while the
// container runs; should the program go away, the relay's start of it
// fails (exit 127) and says so on stderr.
func (c *Container) LookPath(ctx context.Context, name string) (string, error) {
	if p, ok := c.found.Load(name); ok {
		if err := c.Engine.Running(ctx); err != nil {
			return "", err
		}
		return p.(string), nil
	}
	p, err := relay.Which(ctx, c.Engine.Run, c.Relay, name, c.Where)
	if err != nil {
		return "", err
	}
	c.found.Store(name, p)
	return p, nil
}

// Keep keeps path as LookPath's answer for name, as a program found and
// then removed from the container leaves it.
func (c *Container) Keep(name, path string) { c.found.Store(name, path) }

// ThroughSocket says whether p, started by a Container, has its stdin and
// stdout on a stdio socket rather than in the exec's stream.
func ThroughSocket(p enclosure.Process) bool {
	h, ok := p.(*handle)
	return ok && h.socket.Conn() != nil
}

// Dial connects to a TCP port on the container's loopback.
func (c *Container) Dial(ctx context.Context, port int) (net.Conn, error) {
	if err := enclosure.CheckPort(port); err != nil {
		return nil, err
	}
	if n, ok := c.Engine.(NetnsDialer); ok && c.Netns {
		return n.DialNetns(ctx, port)
	}
	return c.Engine.DialPort(ctx, port)
}

// Start runs cmd under the relay in an exec: the relay's stdin framed
// (closing the program's stdin is a frame; the exec's end, or Berth's,
// ends the run), stderr in the exec's stream. stdin and stdout go through
// a socket in cmd.Dir where Berth sees that directory too (the driver's
// stdio: socket), else in the exec's stream as well.
func (c *Container) Start(ctx context.Context, cmd enclosure.Cmd) (enclosure.Process, error) {
	path := cmd.Path
	// A name is looked up on the PATH, an absolute path checked (once a
	// container): a program that is not there is ErrNotFound here, not an
	// exit 127 after the start.
	if !strings.Contains(path, "/") || pathpkg.IsAbs(path) {
		p, err := c.LookPath(ctx, path)
		if err != nil {
			return nil, err
		}
		path = p
	}
	tag := relay.NewTag()
	if l := c.Sockets.Listen(cmd.Dir, tag, c.HostPath); l != nil {
		p, err := c.StartOn(ctx, path, tag, cmd, l)
		if !errors.Is(err, relay.ErrNotConnected) {
			return p, err
		}
	}
	return c.StartOn(ctx, path, tag, cmd, nil)
}

// StartOn starts the relay's exec of path, with stdio through l when
// given. It returns an error wrapping relay.ErrNotConnected when the
// relay ended without connecting to l.
//
// With cmd.Keep and a socket, the relay holds the program (see
// enclosure.Keep): it listens in relay.HoldDir inside the container and
// hands the program's stdio pipes over the socket; without a socket
// (the exec's stream carries stdio), there is nothing it could hand a
// Berth that comes back, and the process is not kept.
func (c *Container) StartOn(ctx context.Context, path, tag string, cmd enclosure.Cmd, l *relay.StdioListener) (enclosure.Process, error) {
	o := relay.RunOptions{Stdin: relay.StdinFramed, Tag: tag}
	keep := cmd.Keep != nil && cmd.Keep.Grace > 0 && l != nil
	if keep {
		o.Hold, o.HoldSocket = cmd.Keep.Grace, relay.HoldSocket(relay.HoldDir, tag)
		l.UseToken(cmd.Keep.Token)
		if cmd.Stderr != nil {
			// The engine copies the relay's own stderr into it, and the
			// handle the program's: whole writes at a time.
			cmd.Stderr = relay.LockedWriter(cmd.Stderr)
		}
	}
	x := Exec{Program: path, Env: cmd.Env, Dir: cmd.Dir, Tag: tag, Stderr: cmd.Stderr, Socket: l != nil, Kept: keep}
	if c.RelaySetsDirEnv {
		o.Dir, o.Env = cmd.Dir, cmd.Env
		x.Dir, x.Env = "", nil
	}
	if l != nil {
		defer l.Close()
		o.Connect = pathpkg.Join(cmd.Dir, l.Name)
	}
	x.Argv = relay.RunArgs(c.Relay, o, path, cmd.Args...)
	s, err := c.Engine.Exec(ctx, x)
	if err != nil {
		return nil, err
	}
	h := newHandle(c, s, tag, l != nil)
	if l == nil {
		return h, nil
	}
	// The socket's token goes first on the relay's stdin, before any
	// frame: in the exec's environment or on its command line, every
	// process in the container could read it (issue 24 item 3).
	if _, err := io.WriteString(s.Stdin(), l.TokenLine()); err != nil {
		h.attach(nil)
		_ = h.Kill()
		return nil, fmt.Errorf("%s: starting %s in %q: the relay's stdin: %w", c.Where, path, cmd.Dir, err)
	}
	// The exit code of a relay that did not connect is read only once
	// the handle knows it has no socket.
	conn, err := c.Sockets.Accept(ctx, l, s.Pid(), s.Ended(), func() (int, error) {
		h.attach(nil)
		return h.Wait()
	})
	if err == nil && keep {
		if err = h.handOver(conn, cmd.Stderr); err != nil {
			h.attach(nil)
			err = h.notHandedOver(err)
		}
		conn = nil
	}
	h.attach(conn)
	if err != nil {
		if !errors.Is(err, relay.ErrNotConnected) {
			_ = h.Kill()
			err = fmt.Errorf("%s: starting %s in %q: %w", c.Where, path, cmd.Dir, err)
		}
		return nil, err
	}
	if cmd.Keep != nil && cmd.Keep.Grace > 0 && !keep {
		h.why = "its stdio goes through the exec's stream (" + c.Sockets.Key + "), which a Berth that comes back cannot take over"
	}
	return h, nil
}

// Drop lets go of the exec of p, started by a Container, without a
// signal, as Berth's end of it vanishing would: the relay reads its
// stdin's EOF and ends the run, or, for a kept process, holds it.
func Drop(p enclosure.Process) {
	if h, ok := p.(*handle); ok {
		h.Drop()
	}
}

// StreamOf is the engine's stream of p, started by a Container (nil for
// another process), for a driver's own tests of its streams.
func StreamOf(p enclosure.Process) Stream {
	if h, ok := p.(*handle); ok {
		return h.s
	}
	return nil
}
