package docker

import (
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/djherbis/buffer"
	"github.com/djherbis/nio/v3"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/berth-dev/berth/enclosure/relay"
)

// dialRelay connects through an exec of "relay dial --ready", itself run
// under "relay run" so that it ends when the connection is closed. The
// connection is up once the relay says so on stderr; a refused one ends
// the exec with the reason there.
func (c *container) dialRelay(ctx context.Context, port int) (net.Conn, error) {
	d := relay.DialArgs(c.Relay, port)
	argv := relay.RunArgs(c.Relay, relay.RunOptions{}, d[0], d[1:]...)
	execID, hj, err := c.exec(ctx, argv, nil, "", true)
	if err != nil {
		return nil, err
	}
	mine, theirs := net.Pipe()
	conn := &execConn{Conn: mine, hj: hj}
	ready, early := splitDial(hj.Reader, theirs, func() { hj.Close() })
	select {
	case err := <-ready:
		if err == nil {
			return conn, nil
		}
		conn.Close()
		ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), apiTimeout)
		defer cancel()
		code, _ := c.exitCode(ictx, execID)
		return nil, fmt.Errorf("nothing accepts connections on 127.0.0.1:%d in docker container %s (relay dial: exit %d: %v)", port, c.name, code, err)
	case <-ctx.Done():
		conn.Close()
		if n := early(); n > earlyOutput {
			return nil, fmt.Errorf("connecting to 127.0.0.1:%d in docker container %s: the server sent %d bytes before the relay said it was connected, more than the %d Berth holds for it, so the relay's word never came (%w); set docker.dial: netns for such a server", port, c.name, n, earlyOutput, ctx.Err())
		}
		return nil, fmt.Errorf("connecting to 127.0.0.1:%d in docker container %s: %w", port, c.name, ctx.Err())
	}
}

// earlyOutput bounds what a server may send through a relay's dial
// before the relay's ready line is read (see splitDial).
const earlyOutput = 1 << 20

// splitDial reads, in the background, the multiplexed stream of a relay
// dial's exec: its stdout goes to conn (the connection's far end, closed
// when the stream ends or conn's reader goes away), its stderr to the
// relay's ready line, whose outcome it returns, with how many bytes of
// stdout came so far (early: before the line, while it has not come);
// ended is called when the stream ends.
//
// Docker sends stdout and stderr in one stream, and the caller reads the
// connection only once Dial has returned, after the ready line. A server
// that speaks first (debugpy's adapter sends events at once) can put its
// greeting in the stream before that line: it waits in a buffer of up to
// earlyOutput bytes, so that the line gets through, rather than hold the
// stream, the line and the Dial until the call gives up. More than that
// holds them: early then says so.
func splitDial(stream io.Reader, conn io.WriteCloser, ended func()) (ready <-chan error, early func() int64) {
	stderrR, stderrW := io.Pipe()
	outR, outW := nio.Pipe(buffer.New(earlyOutput))
	var sent atomic.Int64 // stdout bytes handed to the buffer, counted before each write
	out := writerFunc(func(b []byte) (int, error) {
		sent.Add(int64(len(b)))
		return outW.Write(b)
	})
	go func() {
		_, err := stdcopy.StdCopy(out, stderrW, stream)
		stderrW.CloseWithError(err)
		outW.CloseWithError(err)
		ended()
	}()
	go func() {
		_, err := io.Copy(conn, outR)
		outR.CloseWithError(err) // the reader went away: the demultiplexer's writes fail, not wait
		conn.Close()
	}()
	return relay.DialReady(stderrR), sent.Load
}

// writerFunc is a function as an io.Writer.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// execConn is a connection through an exec's streams: reads come from
// the exec's stdout (through a net.Pipe, which gives them deadlines),
// writes go straight to its stdin.
type execConn struct {
	net.Conn // the reading end
	hj       client.HijackedResponse
}

func (c *execConn) Write(b []byte) (int, error) { return c.hj.Conn.Write(b) }

// CloseWrite half-closes: the far end reads EOF.
func (c *execConn) CloseWrite() error { return c.hj.CloseWrite() }

func (c *execConn) Close() error {
	c.hj.Close()
	return c.Conn.Close()
}

func (c *execConn) SetDeadline(t time.Time) error {
	_ = c.hj.Conn.SetWriteDeadline(t)
	return c.Conn.SetDeadline(t)
}

func (c *execConn) SetWriteDeadline(t time.Time) error { return c.hj.Conn.SetWriteDeadline(t) }

// DialNetns connects from Berth's side: it enters the container's network
// namespace (found through its init's pid) on a locked OS thread, opens
// the socket there, and leaves. It needs CAP_SYS_ADMIN on the engine's
// host: the alternative to dialRelay for a root Berth beside the engine.
func (c *container) DialNetns(ctx context.Context, port int) (net.Conn, error) {
	ictx, cancel := context.WithTimeout(ctx, apiTimeout)
	res, err := c.cli.ContainerInspect(ictx, c.id, client.ContainerInspectOptions{})
	cancel()
	if err != nil {
		return nil, c.failed(ctx, "dial", err)
	}
	if err := notRunning(res.Container); err != nil {
		return nil, err
	}
	type dialed struct {
		conn net.Conn
		err  error
	}
	ch := make(chan dialed, 1)
	go func() {
		runtime.LockOSThread()
		conn, restored, err := dialIn(ctx, res.Container.State.Pid, port)
		if restored {
			runtime.UnlockOSThread()
		} // else the thread is in the container's namespace: it ends with this goroutine
		ch <- dialed{conn, err}
	}()
	r := <-ch
	if r.err != nil {
		return nil, fmt.Errorf("nothing accepts connections on 127.0.0.1:%d in docker container %s (network namespace of pid %d): %v", port, c.name, res.Container.State.Pid, r.err)
	}
	return r.conn, nil
}

// dialIn runs on a locked thread: it enters the network namespace of pid,
// dials the literal loopback address (no name to resolve), and returns to
// the thread's own namespace, saying whether it could.
func dialIn(ctx context.Context, pid, port int) (net.Conn, bool, error) {
	own, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, true, err
	}
	defer unix.Close(own)
	target, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, true, err
	}
	defer unix.Close(target)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		return nil, true, fmt.Errorf("setns: %w (it needs root on the engine's host; use docker.dial: relay)", err)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	restored := unix.Setns(own, unix.CLONE_NEWNET) == nil
	return conn, restored, err
}
