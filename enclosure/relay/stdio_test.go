package relay_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure/mounts"
	"github.com/berth-dev/berth/enclosure/relay"
)

// dialStdio connects to l as a relay would (or, with the wrong token,
// as a stranger would) and writes token and a newline.
func dialStdio(t *testing.T, dir string, l *relay.StdioListener, token string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", filepath.Join(dir, l.Name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, token+"\n"); err != nil {
		t.Fatal(err)
	}
	return c
}

func token(l *relay.StdioListener) string {
	return strings.TrimSuffix(l.TokenLine(), "\n")
}

// A stranger that finds the socket first is closed; the relay with the
// token is the connection Accept returns, and the socket's name is gone
// once it has. Every user may connect (the container's may not be
// Berth's).
func TestStdioListenerAcceptsOnlyTheToken(t *testing.T) {
	dir := t.TempDir()
	l, err := relay.ListenStdio(dir, relay.NewTag())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fi, err := os.Stat(filepath.Join(dir, l.Name))
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o666 {
		t.Fatalf("the socket: %v, %v; want a socket with mode 0666", fi, err)
	}
	stranger := dialStdio(t, dir, l, strings.Repeat("0", len(token(l))))
	relayEnd := dialStdio(t, dir, l, token(l))
	conn, err := l.Accept(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := os.Stat(filepath.Join(dir, l.Name)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the socket's name after Accept: %v", err)
	}
	_ = stranger.SetReadDeadline(time.Now().Add(5 * time.Second))
	// Closed: EOF, or a reset where the listener closed it with bytes
	// of its unread.
	if n, err := stranger.Read(make([]byte, 1)); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the stranger's connection: read %d, %v; want it closed", n, err)
	}
	io.WriteString(relayEnd, "hello")
	relayEnd.(*net.UnixConn).CloseWrite()
	if b, _ := io.ReadAll(conn); string(b) != "hello" {
		t.Fatalf("read %q", b)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}

// Accept gives up when the relay ended without connecting, or ctx ends;
// a relay that connected and then ended is still taken.
func TestStdioListenerGivesUp(t *testing.T) {
	ended := make(chan struct{})
	close(ended)
	dir := t.TempDir()

	l, err := relay.ListenStdio(dir, relay.NewTag())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Accept(context.Background(), ended); !errors.Is(err, relay.ErrNotConnected) {
		t.Fatalf("the relay ended: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("left behind: %v", entries)
	}

	l, err = relay.ListenStdio(dir, relay.NewTag())
	if err != nil {
		t.Fatal(err)
	}
	dialStdio(t, dir, l, token(l))
	conn, err := l.Accept(context.Background(), ended)
	if err != nil {
		t.Fatalf("a relay that connected, then ended: %v", err)
	}
	conn.Close()

	l, err = relay.ListenStdio(dir, relay.NewTag())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := l.Accept(ctx, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ctx ended: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("left behind: %v", entries)
	}
}

// A directory Berth cannot write is an error at Listen: the caller then
// carries stdio in the exec's stream.
func TestStdioListenerInAReadOnlyDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o755)
	if os.Geteuid() == 0 {
		// root writes anywhere: a missing directory stands in.
		dir = filepath.Join(dir, "missing")
	}
	if l, err := relay.ListenStdio(dir, relay.NewTag()); err == nil {
		l.Close()
		t.Fatal("listening in a directory that cannot hold the socket did not fail")
	}
}

// Twenty strangers that connect first and send nothing do not hold the
// relay up: their tokens are read side by side, so the relay behind them
// is taken long before a start's deadline (here 10 s, where 20 checks
// one after another took 40 s), and the strangers are closed once it is.
// Issue 24 item 3.
func TestStdioListenerSilentStrangersDoNotHoldUpTheRelay(t *testing.T) {
	dir, err := os.MkdirTemp("", "s") // short: the test's name would overflow the address
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	l, err := relay.ListenStdio(dir, relay.NewTag())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var strangers []net.Conn
	for range 20 {
		c, err := net.Dial("unix", filepath.Join(dir, l.Name))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		strangers = append(strangers, c)
	}
	relayEnd := dialStdio(t, dir, l, token(l))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	conn, err := l.Accept(ctx, nil)
	if err != nil {
		t.Fatalf("behind 20 silent strangers: %v", err)
	}
	defer conn.Close()
	t.Logf("Accept behind 20 silent strangers took %v", time.Since(start))
	for i, c := range strangers {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("stranger %d: read %d, %v; want EOF", i, n, err)
		}
	}
	io.WriteString(relayEnd, "x")
	relayEnd.(*net.UnixConn).CloseWrite()
	if b, _ := io.ReadAll(conn); string(b) != "x" {
		t.Fatalf("read %q from the relay's connection", b)
	}
}

// peerScript is a relay's stand-in: it reads the token's line on stdin,
// connects to the socket its --connect names, sends the line, then
// echoes one line back.
const peerScript = `import socket, sys
tok = sys.stdin.readline()
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[2])
s.sendall(tok.encode())
f = s.makefile("rwb")
f.write(f.readline()); f.flush()
`

// Where the engine's pid of the relay is the process Berth sees (its
// command line connects to this socket), only that pid may connect: a
// stranger holding the right token is closed unread, the relay is
// taken. A pid that is not that process (Berth in another pid namespace)
// is not used: the token alone decides. Issue 24 item 3.
func TestStdioListenerTakesOnlyTheEnginesPid(t *testing.T) {
	dir, err := os.MkdirTemp("", "s")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)

	l, err := relay.ListenStdio(dir, relay.NewTag())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// A pid whose process does not connect to the socket: the token
	// decides, and the test's own connection, with the token, is taken.
	l.ExpectPeer(os.Getpid() + 1)
	dialStdio(t, dir, l, token(l))
	conn, err := l.Accept(context.Background(), nil)
	if err != nil {
		t.Fatalf("token alone, the pid not Berth's: %v", err)
	}
	conn.Close()

	l, err = relay.ListenStdio(dir, relay.NewTag())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cmd := exec.Command("/usr/bin/python3", "-c", peerScript, "--connect", filepath.Join(dir, l.Name))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	l.ExpectPeer(cmd.Process.Pid)
	// The stranger has the token (as if it had read it somewhere) and
	// connects first.
	stranger := dialStdio(t, dir, l, token(l))
	io.WriteString(stdin, l.TokenLine())
	conn, err = l.Accept(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = stranger.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := stranger.Read(make([]byte, 1)); n != 0 || (err != io.EOF && !errors.Is(err, syscall.ECONNRESET)) {
		t.Fatalf("the stranger with the token: read %d, %v; want its connection closed", n, err)
	}
	io.WriteString(conn, "from Berth\n")
	if b, _ := bufio.NewReader(conn).ReadString('\n'); b != "from Berth\n" {
		t.Fatalf("the relay's stand-in echoed %q", b)
	}
}

// Where the engine's pid is not the process Berth sees connect (Berth in
// a pid namespace of its own: the pid names another process, or none),
// the relay is still taken, by its token alone, and a log line says so
// once per container. Issue 24 item 3.
func TestSocketsTakeTheRelayByItsTokenWhereThePidsAreNotBerths(t *testing.T) {
	dir, err := os.MkdirTemp("", "s")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var log strings.Builder
	s := &relay.Sockets{Where: "test container", Key: "test.stdio", Log: slog.New(slog.NewTextHandler(&log, nil))}
	for _, pid := range []int{1, 1 << 22} { // another process; none
		l, err := relay.ListenStdio(dir, relay.NewTag())
		if err != nil {
			t.Fatal(err)
		}
		dialStdio(t, dir, l, token(l))
		conn, err := s.Accept(context.Background(), l, pid, nil, func() (int, error) { return 0, nil })
		if err != nil {
			t.Fatalf("engine pid %d: %v", pid, err)
		}
		conn.Close()
	}
	if n := strings.Count(log.String(), "by its token alone"); n != 1 {
		t.Errorf("%d log lines say the token alone decides; want 1:\n%s", n, log.String())
	}
}

// The socket's folder is in the container's hands: one that is a
// symlink out of the workdir's mount (swapped in before or while Berth
// opens it) never gets the socket; the start then uses the exec's
// stream. A symlink that stays inside the mount is followed. Issue 24
// item 4.
func TestSocketsNeverListenThroughASymlinkOutOfTheMount(t *testing.T) {
	wd, outside := t.TempDir(), t.TempDir()
	berthPath := mounts.Table{{Source: wd, Destination: "/workspace"}}.Outside
	s := &relay.Sockets{Where: "test container", Key: "test.stdio", Log: slog.New(slog.DiscardHandler)}
	sub := filepath.Join(wd, "sub")
	if err := os.Symlink(outside, sub); err != nil {
		t.Fatal(err)
	}
	if l := s.Listen("/workspace/sub", relay.NewTag(), berthPath); l != nil {
		l.Close()
		t.Errorf("a socket was made through a symlink to %s", outside)
	}
	noEntries(t, outside)

	// Swapped back and forth while Berth listens.
	if err := os.Remove(sub); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	var swaps atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		real, tmp := filepath.Join(wd, "real"), filepath.Join(wd, "tmp")
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = os.Remove(tmp)
			if err := os.Symlink(outside, tmp); err != nil {
				continue
			}
			_ = os.Rename(sub, real)
			_ = os.Rename(tmp, sub) // the folder is now the symlink
			_ = os.Remove(sub)
			_ = os.Rename(real, sub)
			swaps.Add(1)
		}
	}()
	listens, made := 0, 0
	for swaps.Load() < 500 {
		listens++
		if l := s.Listen("/workspace/sub", relay.NewTag(), berthPath); l != nil {
			made++
			l.Close()
		}
	}
	close(stop)
	<-done
	t.Logf("%d listens while the folder was swapped for a symlink %d times; %d made a socket (in the folder)", listens, swaps.Load(), made)
	noEntries(t, outside)

	// A symlink that stays inside the mount is followed.
	if err := os.Symlink("sub", filepath.Join(wd, "inside")); err != nil {
		t.Fatal(err)
	}
	l := s.Listen("/workspace/inside", relay.NewTag(), berthPath)
	if l == nil {
		t.Fatal("no socket through a symlink that stays inside the mount")
	}
	defer l.Close()
	if _, err := os.Stat(filepath.Join(sub, l.Name)); err != nil {
		t.Fatalf("the socket is not in the folder the symlink names: %v", err)
	}
}

func noEntries(t *testing.T, dir string) {
	t.Helper()
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a socket outside the workdir's mount, in %s: %v", dir, entries)
	}
}

// SocketStdio: End waits for Attach; a lost process's connection is
// closed (its reader sees EOF), an ended one's is left to its reader; a
// start that offered no socket has no connection.
func TestSocketStdioEnd(t *testing.T) {
	var none *relay.SocketStdio
	if none.Conn() != nil {
		t.Fatal("a nil SocketStdio has a connection")
	}
	for _, lost := range []bool{false, true} {
		ours, theirs, err := unixPair()
		if err != nil {
			t.Fatal(err)
		}
		s := relay.NewSocketStdio()
		ended := make(chan struct{})
		go func() { s.End(lost); close(ended) }()
		select {
		case <-ended:
			t.Fatal("End returned before Attach")
		case <-time.After(50 * time.Millisecond):
		}
		s.Attach(ours)
		<-ended
		theirs.Write([]byte("x"))
		_, err = ours.Read(make([]byte, 1))
		if closed := err != nil; closed != lost {
			t.Errorf("lost %v: the connection closed: %v (%v)", lost, closed, err)
		}
		ours.Close()
		theirs.Close()
	}
	s := relay.NewSocketStdio()
	s.Attach(nil)
	s.End(true) // no connection: nothing to close, and no wait
	if s.Conn() != nil {
		t.Fatal("a connection after Attach(nil)")
	}
}

// unixPair is two connected unix sockets.
func unixPair() (*net.UnixConn, *net.UnixConn, error) {
	dir, err := os.MkdirTemp("", "s")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "p"), Net: "unix"})
	if err != nil {
		return nil, nil, err
	}
	defer l.Close()
	a, err := net.DialUnix("unix", nil, l.Addr().(*net.UnixAddr))
	if err != nil {
		return nil, nil, err
	}
	b, err := l.AcceptUnix()
	if err != nil {
		a.Close()
		return nil, nil, err
	}
	return b, a, nil
}
