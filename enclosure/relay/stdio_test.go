package relay_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relay/wire"
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
	return strings.TrimPrefix(l.Env(), wire.EnvToken+"=")
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
	if n, err := stranger.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the stranger's connection: read %d, %v; want EOF", n, err)
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

// A stranger that connects first and sends nothing holds Accept up for
// the token's wait only (2 s), then is closed, and the relay behind it is
// taken.
func TestStdioListenerDropsASilentStrangerAfterTheTokenWait(t *testing.T) {
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
	silent, err := net.Dial("unix", filepath.Join(dir, l.Name))
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	relayEnd := dialStdio(t, dir, l, token(l))
	start := time.Now()
	conn, err := l.Accept(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if took := time.Since(start); took < 1500*time.Millisecond || took > 5*time.Second {
		t.Errorf("Accept took %v behind a silent stranger; want the token's wait, 2s", took)
	}
	io.WriteString(relayEnd, "x")
	relayEnd.(*net.UnixConn).CloseWrite()
	if b, _ := io.ReadAll(conn); string(b) != "x" {
		t.Fatalf("read %q from the relay's connection", b)
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
