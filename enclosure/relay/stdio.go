package relay

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-dev/berth/enclosure/relay/wire"
)

// StdioListener is Berth's end of "run --connect": a unix socket in a
// directory that Berth and the enclosure both see (the workdir's bind
// mount), through which the program's stdin and stdout pass straight
// between Berth and the program, with no engine between them (an exec's
// stream passes each message through the engine and its shim: see
// docs/development/benchmarks.md for what that costs). The socket's name is
// in the directory only from Listen to Accept: it is removed as soon as
// the relay connected, or at Close.
type StdioListener struct {
	l     *net.UnixListener
	dir   *os.File // the directory, opened once (O_PATH)
	path  string   // the socket as Berth sees it
	Name  string   // its name in the directory
	token string

	once sync.Once
	err  error
}

// ListenStdio listens on a new socket in dir, a directory as Berth sees
// it; tag names it, so that the socket of one run is told from another's.
// The socket is writable by every user, since the enclosure's may not be
// Berth's: the token keeps any other process from passing for the relay.
//
// The directory is shared with the container, whose processes may swap
// what is in it at any moment, so every step goes through one descriptor
// of it, opened first: the bind, the chmod (of what is there only if it
// is a socket, never through a symlink) and the removal. Nothing Berth
// does here can reach a file outside dir.
func ListenStdio(dir, tag string) (*StdioListener, error) {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	s := &StdioListener{Name: "." + tag + ".sock", token: hex.EncodeToString(b)}
	s.path = filepath.Join(dir, s.Name)
	d, err := os.OpenFile(dir, os.O_RDONLY|unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	s.dir = d
	// Through the descriptor: the directory stays the one opened, and the
	// address stays short, however long dir is.
	addr := "/proc/self/fd/" + strconv.Itoa(int(d.Fd())) + "/" + s.Name
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		d.Close()
		return nil, err
	}
	l.SetUnlinkOnClose(false) // Close removes it, through the descriptor
	s.l = l
	if err := s.chmod(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// chmod makes the socket writable by all: what is at its name, opened
// without following a symlink, and only if it is a socket.
func (s *StdioListener) chmod() error {
	fd, err := unix.Openat(int(s.dir.Fd()), s.Name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return fmt.Errorf("%s is no longer the socket Berth made", s.path)
	}
	return unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), 0o666)
}

// Env is the variable to give the relay, KEY=VALUE.
func (s *StdioListener) Env() string { return wire.EnvToken + "=" + s.token }

// TokenLine is what to write first to the stdin of a relay run with
// RunOptions.TokenStdin.
func (s *StdioListener) TokenLine() string { return s.token + "\n" }

// acceptWait bounds Accept when ctx has no earlier deadline: the relay
// connects before it starts the program, at once.
const acceptWait = 30 * time.Second

// tokenWait bounds the read of a connection's token.
const tokenWait = 2 * time.Second

// ErrNotConnected is Accept's error when ended closed first: the relay
// exited without connecting (it could not reach the socket).
var ErrNotConnected = errors.New("the relay exited without connecting to its stdio socket")

// Accept returns the relay's connection: the first whose first line is
// the token (any other is closed). It gives up when ended is closed (the
// relay's exec ended) and nothing connected before, or when ctx is done;
// it removes the socket's name either way. The connection's writes are
// the program's stdin, its reads the program's stdout; CloseWrite closes
// the program's stdin.
func (s *StdioListener) Accept(ctx context.Context, ended <-chan struct{}) (*net.UnixConn, error) {
	defer s.Close()
	ctx, cancel := context.WithTimeout(ctx, acceptWait)
	defer cancel()
	var (
		mu  sync.Mutex
		why error
	)
	done := make(chan struct{})
	defer close(done)
	go func() {
		var err error
		select {
		case <-ended:
			err = ErrNotConnected
		case <-ctx.Done():
			err = ctx.Err()
		case <-done:
			return
		}
		mu.Lock()
		why = err
		mu.Unlock()
		_ = s.l.SetDeadline(time.Unix(1, 0)) // wakes AcceptUnix
	}()
	drained := false
	for {
		conn, err := s.l.AcceptUnix()
		if err == nil {
			if s.check(conn) {
				return conn, nil
			}
			conn.Close()
			continue
		}
		mu.Lock()
		reason := why
		mu.Unlock()
		if reason == nil {
			return nil, fmt.Errorf("accepting on %s: %w", s.path, err)
		}
		if reason == ErrNotConnected && !drained {
			// A relay that connected and then ended (its program not
			// found) is in the backlog before its exec ends: take it.
			drained = true
			_ = s.l.SetDeadline(time.Now().Add(drainWait))
			continue
		}
		return nil, reason
	}
}

// drainWait bounds the last look for a connection once the relay ended;
// one made is already queued.
const drainWait = 20 * time.Millisecond

// check reads conn's first line and says whether it is the token.
func (s *StdioListener) check(conn *net.UnixConn) bool {
	_ = conn.SetReadDeadline(time.Now().Add(tokenWait))
	got := make([]byte, len(s.token)+1)
	if _, err := io.ReadFull(conn, got); err != nil {
		return false
	}
	_ = conn.SetReadDeadline(time.Time{})
	want := []byte(s.token + "\n")
	return subtle.ConstantTimeCompare(got, want) == 1
}

// Close stops listening and removes the socket's name (in the directory
// it was made in, whatever has become of the path). Safe to call more
// than once.
func (s *StdioListener) Close() error {
	s.once.Do(func() {
		s.err = s.l.Close()
		if err := unix.Unlinkat(int(s.dir.Fd()), s.Name, 0); err != nil && !errors.Is(err, unix.ENOENT) && s.err == nil {
			s.err = err
		}
		s.dir.Close()
	})
	return s.err
}

// SocketStdin is the program's stdin through its socket: Close closes
// the program's stdin (a half-close) and leaves its stdout open.
func SocketStdin(conn *net.UnixConn) io.WriteCloser { return socketStdin{conn} }

type socketStdin struct{ *net.UnixConn }

func (s socketStdin) Close() error { return s.CloseWrite() }

// SocketStdout is the program's stdout through its socket, read directly
// (no copy in between). Its end, or a close of the socket by its owner
// (a process lost with its engine), is EOF; at EOF the socket is closed,
// as reading a pipe to EOF releases it.
func SocketStdout(conn *net.UnixConn) io.Reader { return socketStdout{conn} }

type socketStdout struct{ conn *net.UnixConn }

func (s socketStdout) Read(b []byte) (int, error) {
	n, err := s.conn.Read(b)
	if err != nil {
		s.conn.Close()
		err = io.EOF
	}
	return n, err
}

// SocketStdio is the stdin and stdout of a process whose start offered a
// stdio socket: the connection comes after the exec has begun (Attach,
// from the start, with nil when the relay did not connect), and the
// handle's owner goroutine, once the exec's stream has ended, waits for
// it (End).
type SocketStdio struct {
	attached chan struct{}
	once     sync.Once
	conn     *net.UnixConn
}

// NewSocketStdio returns one waiting for Attach.
func NewSocketStdio() *SocketStdio { return &SocketStdio{attached: make(chan struct{})} }

// Attach gives the connection (nil: none came). Only the first call
// counts.
func (s *SocketStdio) Attach(conn *net.UnixConn) {
	s.once.Do(func() {
		s.conn = conn
		close(s.attached)
	})
}

// Conn is the connection Attach gave: nil when none came, or on a nil
// SocketStdio (a start that offered no socket). Call it only after
// Attach (a start returns after it).
func (s *SocketStdio) Conn() *net.UnixConn {
	if s == nil {
		return nil
	}
	return s.conn
}

// End waits for Attach and, for a process that may still run (lost: its
// stream broke, or was dropped before it ended), closes the connection,
// so that its reader sees EOF. Otherwise the program's exit ended the
// socket, and its reader closes it at EOF.
func (s *SocketStdio) End(lost bool) {
	<-s.attached
	if s.conn != nil && lost {
		s.conn.Close()
	}
}

// Sockets is one container's choice of stdio: through a socket where a
// start's directory is shared, until a relay could not connect to one
// (the container's view of the directory is not Berth's, as with a file
// system shared through a VM), after which every start uses the exec's
// stream.
type Sockets struct {
	Off   bool   // the configuration says exec: never a socket
	Where string // the container, for the log: "docker container NAME"
	Key   string // the configuration key that turns sockets off
	Log   *slog.Logger

	failed atomic.Bool
}

// Listen returns the socket of a start in dir (as the container sees
// it), or nil when the exec's stream is to carry stdio: sockets are off,
// dir is not in a mount Berth sees (berthPath fails), or Berth cannot
// make the socket there.
func (s *Sockets) Listen(dir, tag string, berthPath func(string) (string, error)) *StdioListener {
	if s.Off || dir == "" || s.failed.Load() {
		return nil
	}
	berthDir, err := berthPath(dir)
	if err != nil {
		return nil
	}
	l, err := ListenStdio(berthDir, tag)
	if err != nil {
		s.Log.Debug("no stdio socket; using the exec's stream", "container", s.Where, "dir", berthDir, "err", err)
		return nil
	}
	return l
}

// Accept waits for the relay of a start to connect to l. ended is closed
// when the exec has ended, and wait then gives its exit code. An error
// wrapping ErrNotConnected means the relay could not connect (it ended
// with ExitRelayFailed): the socket is given up for the container, with
// a log line, and the caller starts the process again without one. Any
// other error is the start's: the caller kills the process.
func (s *Sockets) Accept(ctx context.Context, l *StdioListener, ended <-chan struct{}, wait func() (int, error)) (*net.UnixConn, error) {
	conn, err := l.Accept(ctx, ended)
	if !errors.Is(err, ErrNotConnected) {
		return conn, err
	}
	code, werr := wait()
	switch {
	case werr != nil:
		return nil, werr // the container stopped, or its engine went
	case code == wire.ExitRelayFailed:
		if !s.failed.Swap(true) {
			s.Log.Info("a relay could not connect to its stdio socket; this container's processes use the exec's stream from now on ("+s.Key+": exec skips the attempt)",
				"container", s.Where, "socket", l.path)
		}
		return nil, fmt.Errorf("%s: %w", s.Where, err)
	}
	return nil, fmt.Errorf("the relay ended (exit %d) before it connected to its stdio socket %s: the process's stderr (lsp status, the server log) says why; %s: exec starts it without the socket", code, l.path, s.Key)
}

// GivenUp says whether a relay in this container could not connect.
func (s *Sockets) GivenUp() bool { return s.failed.Load() }
