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
	"path"
	"path/filepath"
	"strconv"
	"strings"
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
//
// Every process in the container can connect to it. Accept takes only
// the relay: the first line must be the token, which the relay reads on
// its stdin (TokenLine; never in an environment or on a command line,
// which every process in the container can read), and where the engine
// says which pid the relay has, the connection must come from that pid
// (ExpectPeer). Strangers are checked side by side, so that none holds
// up the relay's connection.
type StdioListener struct {
	l     *net.UnixListener
	dir   *os.File // the directory, opened once
	path  string   // the socket as Berth sees it
	Name  string   // its name in the directory
	token string
	peer  int // the only pid a connection may come from; 0: any (the token decides)

	once sync.Once
	err  error
}

// ListenStdio listens on a new socket in dir, a directory as Berth sees
// it, every part of which Berth trusts (a test's own directory): it is
// ListenStdioIn(dir, ".", tag).
func ListenStdio(dir, tag string) (*StdioListener, error) {
	return ListenStdioIn(dir, ".", tag)
}

// ListenStdioIn listens on a new socket in dir, a directory relative to
// root, both as Berth sees them; tag names the socket, so that the socket
// of one run is told from another's. root is what the container cannot
// change (the top of its mount of the workdir, on Berth's side); dir, in
// the container's hands, is opened beneath root without ever leaving it:
// a symlink in dir that points out of root (a host folder, or any
// absolute path) fails the open, whenever the container swaps it in
// (issue 24 item 4). The socket is writable by every user, since the
// enclosure's may not be Berth's: the token keeps any other process from
// passing for the relay.
//
// Every later step goes through the one descriptor of the directory,
// opened first: the bind, the chmod (of what is there only if it is a
// socket, never through a symlink) and the removal. Nothing Berth does
// here can reach a file outside root.
func ListenStdioIn(root, dir, tag string) (*StdioListener, error) {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	s := &StdioListener{Name: "." + tag + ".sock", token: hex.EncodeToString(b)}
	s.path = filepath.Join(root, dir, s.Name)
	d, err := openBeneath(root, dir)
	if err != nil {
		return nil, err
	}
	s.dir = d
	// Through the descriptor: the directory stays the one opened, and the
	// address stays short, however long its path is.
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

// openBeneath opens the directory dir beneath root (os.Root: no step of
// the lookup, "..", or symlink leaves root, however the names change
// meanwhile).
func openBeneath(root, dir string) (*os.File, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	d, err := r.Open(dir)
	if err != nil {
		return nil, err
	}
	fi, err := d.Stat()
	if err == nil && !fi.IsDir() {
		err = fmt.Errorf("%s is not a directory", filepath.Join(root, dir))
	}
	if err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
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

// UseToken makes token the one Accept wants, in place of the one made
// for the listener: a held process's relay says the same token to Berth
// and hears it from a Berth that comes back (enclosure.Keep). Call it
// before the relay starts.
func (s *StdioListener) UseToken(token string) { s.token = token }

// TokenLine is what to write first to the stdin of a relay run with
// RunOptions.Connect: the token, which Accept wants as a connection's
// first line.
func (s *StdioListener) TokenLine() string { return s.token + "\n" }

// ExpectPeer gives the relay's pid as its engine reports it (a host
// pid); call it before Accept. The engine's pids are Berth's own only
// when Berth runs in the engine's pid namespace (on the host, or in a
// container sharing it), so the pid is trusted only while the process
// Berth sees under it is this very relay, the one whose command line
// connects to this socket: then Accept takes no connection made by any
// other pid, and closes it unread. Otherwise (Berth in a pid namespace of
// its own, or the relay not yet exec'd, or gone) the token alone decides
// (issue 24 item 3).
func (s *StdioListener) ExpectPeer(pid int) { s.peer = pid }

// connectsTo says whether the process pid, as Berth sees it, is a relay
// whose --connect names a socket called name. A process in the middle of
// its exec (the engine's exec said it started, the kernel has not yet
// set up its arguments) has an empty command line for a moment: it is
// read again for up to cmdlineWait, since a stranger that connects in
// that moment must not be taken for the relay.
func connectsTo(pid int, name string) bool {
	var b []byte
	for deadline := time.Now().Add(cmdlineWait); ; time.Sleep(2 * time.Millisecond) {
		var err error
		if b, err = os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err != nil {
			return false
		}
		if len(b) > 0 || time.Now().After(deadline) {
			break
		}
	}
	args := strings.Split(string(b), "\x00")
	for i, a := range args {
		if a == "--" {
			return false // PROG's own arguments
		}
		if a == "--connect" && i+1 < len(args) {
			c := args[i+1]
			return c == name || strings.HasSuffix(c, "/"+name)
		}
	}
	return false
}

// peerPid is the pid that made conn (SO_PEERCRED), as Berth's pid
// namespace sees it (0: a process it does not see).
func peerPid(conn *net.UnixConn) (int, bool) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return 0, false
	}
	var cred *unix.Ucred
	cerr := raw.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if cerr != nil || err != nil {
		return 0, false
	}
	return int(cred.Pid), true
}

// fromPeer says whether conn may be the relay's by the pid that made it:
// any pid without ExpectPeer; the relay's own; another only while the
// engine's pid is not a relay of this socket as Berth sees it.
func (s *StdioListener) fromPeer(conn *net.UnixConn) bool {
	if s.peer <= 0 {
		return true
	}
	if pid, ok := peerPid(conn); ok && pid == s.peer {
		return true
	}
	return !connectsTo(s.peer, s.Name)
}

// cmdlineWait bounds connectsTo's wait for a command line being set up.
const cmdlineWait = 200 * time.Millisecond

// acceptWait bounds Accept when ctx has no earlier deadline: the relay
// connects before it starts the program, at once.
const acceptWait = 30 * time.Second

// tokenWait bounds the read of a connection's token.
const tokenWait = 2 * time.Second

// maxChecks bounds the connections whose token is read at once; one more
// is accepted once a check ends (within tokenWait).
const maxChecks = 64

// ErrNotConnected is Accept's error when ended closed first: the relay
// exited without connecting (it could not reach the socket).
var ErrNotConnected = errors.New("the relay exited without connecting to its stdio socket")

// Accept returns the relay's connection: the first whose first line is
// the token, and which comes from the pid ExpectPeer gave (any other is
// closed; one from another pid at once, unread). The tokens of several
// connections are read side by side, up to maxChecks at once, so a
// stranger that connects first and says nothing costs the relay no wait.
// Accept gives up when ended is closed (the relay's exec ended) and
// nothing connected before, or when ctx is done; it removes the socket's
// name either way. The connection's writes are the program's stdin, its
// reads the program's stdout; CloseWrite closes the program's stdin.
func (s *StdioListener) Accept(ctx context.Context, ended <-chan struct{}) (*net.UnixConn, error) {
	defer s.Close()
	ctx, cancel := context.WithTimeout(ctx, acceptWait)
	defer cancel()
	var (
		won     = make(chan *net.UnixConn, 1)
		failed  = make(chan error, 1)
		quit    = make(chan struct{})
		slots   = make(chan struct{}, maxChecks)
		mu      sync.Mutex
		pending = map[*net.UnixConn]bool{} // being checked
		loop    sync.WaitGroup
		checks  sync.WaitGroup
	)
	loop.Go(func() {
		for {
			conn, err := s.l.AcceptUnix()
			if err != nil {
				failed <- err
				return
			}
			if !s.fromPeer(conn) {
				conn.Close()
				continue
			}
			select {
			case slots <- struct{}{}:
			case <-quit:
				conn.Close()
				return
			}
			mu.Lock()
			pending[conn] = true
			mu.Unlock()
			checks.Go(func() {
				defer func() { <-slots }()
				ok := s.check(conn)
				mu.Lock()
				delete(pending, conn)
				mu.Unlock()
				if ok {
					select {
					case won <- conn:
						return
					default: // another won first
					}
				}
				conn.Close()
			})
		}
	})
	defer func() {
		close(quit)
		_ = s.l.SetDeadline(time.Unix(1, 0)) // wakes AcceptUnix
		loop.Wait()
		mu.Lock()
		for conn := range pending {
			conn.Close() // its check's read ends now
		}
		mu.Unlock()
		checks.Wait()
		select {
		case conn := <-won:
			conn.Close() // a second winner, or one after Accept gave up
		default:
		}
	}()
	var drain <-chan time.Time
	for {
		select {
		case conn := <-won:
			return conn, nil
		case err := <-failed:
			return nil, fmt.Errorf("accepting on %s: %w", s.path, err)
		case <-ended:
			// A relay that connected and then ended (its program not
			// found) is in the backlog before its exec ends: take it.
			ended, drain = nil, time.After(drainWait)
		case <-drain:
			return nil, ErrNotConnected
		case <-ctx.Done():
			return nil, ctx.Err()
		}
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

	failed      atomic.Bool
	foreignPids atomic.Bool // logged once: the engine's pids are not Berth's
}

// Listen returns the socket of a start in dir (as the container sees
// it), or nil when the exec's stream is to carry stdio: sockets are off,
// dir is not in a mount Berth sees (berthPath fails), or Berth cannot
// make the socket there (a symlink in dir that leads out of its mount,
// among others).
func (s *Sockets) Listen(dir, tag string, berthPath func(string) (string, error)) *StdioListener {
	if s.Off || dir == "" || s.failed.Load() {
		return nil
	}
	root, rel, err := beneath(dir, berthPath)
	if err != nil {
		return nil
	}
	l, err := ListenStdioIn(root, rel, tag)
	if err != nil {
		s.Log.Debug("no stdio socket; using the exec's stream", "container", s.Where, "dir", filepath.Join(root, rel), "err", err)
		return nil
	}
	return l
}

// beneath splits dir, a directory as the container sees it, where the
// container's hands begin: root is Berth's path of the highest folder
// above dir that maps to Berth's paths as dir does (the top of its
// mount, which the container cannot swap), rel the rest of dir, which it
// can.
func beneath(dir string, berthPath func(string) (string, error)) (root, rel string, err error) {
	dir = path.Clean(dir)
	full, err := berthPath(dir)
	if err != nil {
		return "", "", err
	}
	root, rel = full, "."
	for a := dir; a != "/" && a != "."; {
		a = path.Dir(a)
		r := strings.TrimPrefix(dir[len(a):], "/")
		b, err := berthPath(a)
		if err != nil || filepath.Join(b, r) != filepath.Clean(full) {
			break
		}
		root, rel = b, r
	}
	return root, rel, nil
}

// Accept waits for the relay of a start to connect to l. pid is the
// relay's pid as the engine reports it (0: unknown): where Berth sees the
// same pid, only that process may connect (ExpectPeer). ended is closed
// when the exec has ended, and wait then gives its exit code. An error
// wrapping ErrNotConnected means the relay could not connect (it ended
// with ExitRelayFailed): the socket is given up for the container, with
// a log line, and the caller starts the process again without one. Any
// other error is the start's: the caller kills the process.
func (s *Sockets) Accept(ctx context.Context, l *StdioListener, pid int, ended <-chan struct{}, wait func() (int, error)) (*net.UnixConn, error) {
	l.ExpectPeer(pid)
	conn, err := l.Accept(ctx, ended)
	if err == nil && pid > 0 {
		if got, _ := peerPid(conn); got != pid && !s.foreignPids.Swap(true) {
			s.Log.Info("the engine's pid of a relay is not the pid Berth sees connect (Berth runs in a pid namespace of its own?): this container's stdio sockets take the relay by its token alone",
				"container", s.Where, "engine_pid", pid, "peer_pid", got)
		}
	}
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
