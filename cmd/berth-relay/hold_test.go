//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	client "github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/internal/procfs"
)

// heldRelay is a relay run with --hold as the host's Berth runs it: its
// stdin framed, the handover on an inherited socket (fd 3), its hold
// socket in a private directory.
type heldRelay struct {
	*relayProc
	sock   string
	token  string
	handed *client.Handover
}

func startHeld(t *testing.T, grace time.Duration, prog string) *heldRelay {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "relays")
	tag := client.NewTag()
	h := &heldRelay{sock: client.HoldSocket(dir, tag), token: strings.Repeat("5a", 16)}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	theirs := os.NewFile(uintptr(fds[1]), "theirs")
	argv := client.RunArgs(relayBin, client.RunOptions{Stdin: client.StdinFramed, Tag: tag, Grace: 100 * time.Millisecond,
		Hold: grace, HoldSocket: h.sock, ConnectFd: 3}, "sh", "-c", prog)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.ExtraFiles = []*os.File{theirs}
	h.relayProc = start(t, cmd)
	theirs.Close()
	if _, err := h.stdin.Write([]byte(h.token + "\n")); err != nil {
		t.Fatal(err)
	}
	c, err := net.FileConn(os.NewFile(uintptr(fds[0]), "ours"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if h.handed, err = client.ReadHandover(c.(*net.UnixConn), 10*time.Second); err != nil {
		t.Fatalf("the handover: %v (stderr %q)", err, h.stderr)
	}
	if h.handed.Hold != h.sock || h.handed.HoldError != "" || h.handed.Stdin == nil {
		t.Fatalf("the handover: %+v; want it to hold at %s with stdin", h.handed.Hello, h.sock)
	}
	t.Cleanup(h.handed.Close)
	return h
}

// drop is Berth going away: the control's end, and what Berth held of
// the program's stdio closed, with no signal.
func (h *heldRelay) drop() {
	h.stdin.Close()
	h.handed.Close()
}

const echoLines = `echo started; while read l; do echo "got $l"; done; echo eof`

// A held program outlives its caller's end without a signal, with its
// stdin and stdout still open; a stranger with a wrong token is refused;
// a Berth that says the token gets the program's stdio back, with what
// the program wrote meanwhile, and the connection is then its control:
// the empty frame closes the program's stdin, and the last line is its
// exit code.
//
// Issue 29 item 2.
func TestRunHoldKeepsTheProgramForABerthThatComesBack(t *testing.T) {
	h := startHeld(t, time.Minute, echoLines)
	out := bufio.NewReader(h.handed.Stdout)
	if l, _ := out.ReadString('\n'); l != "started\n" {
		t.Fatalf("read %q", l)
	}
	h.handed.Stdin.Write([]byte("one\n"))
	if l, _ := out.ReadString('\n'); l != "got one\n" {
		t.Fatalf("read %q", l)
	}
	pid := h.handed.Pid
	h.drop()
	time.Sleep(300 * time.Millisecond)
	if !procfs.Alive(pid) {
		t.Fatalf("the program (pid %d) ended with its caller: stderr %q", pid, h.stderr)
	}
	if st, err := os.Lstat(filepath.Dir(h.sock)); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("the hold socket's directory: %v, %v; want mode 0700", st, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := client.Reattach(ctx, h.sock, strings.Repeat("00", 16)); !errors.Is(err, client.ErrRefused) || !strings.Contains(err.Error(), "wrong token") {
		t.Fatalf("a stranger's token: %v, want a refusal", err)
	}
	back, conn, err := client.Reattach(ctx, h.sock, h.token)
	if err != nil {
		t.Fatalf("coming back: %v", err)
	}
	defer back.Close()
	defer conn.Close()
	if back.Pid != pid || back.Stdin == nil {
		t.Fatalf("came back to %+v, want pid %d with stdin", back.Hello, pid)
	}
	if _, _, err := client.Reattach(ctx, h.sock, h.token); !errors.Is(err, client.ErrRefused) || !strings.Contains(err.Error(), "attached") {
		t.Fatalf("a second Berth while one is attached: %v, want a refusal", err)
	}
	back.Stdin.Write([]byte("two\n"))
	out = bufio.NewReader(back.Stdout)
	if l, _ := out.ReadString('\n'); l != "got two\n" {
		t.Fatalf("after coming back, read %q", l)
	}
	back.Stdin.Close()
	client.NewFrameWriter(conn).Close() // the relay's copy of stdin too
	if l, _ := out.ReadString('\n'); l != "eof\n" {
		t.Fatalf("after closing stdin, read %q", l)
	}
	if code, err := client.ReadExit(conn); code != 0 || err != nil {
		t.Fatalf("the exit line: %d, %v", code, err)
	}
	if code, _ := h.wait(t); code != 0 {
		t.Errorf("the relay's exit %d", code)
	}
	if _, err := os.Lstat(h.sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the hold socket outlived the relay: %v", err)
	}
}

// No Berth comes back: after the grace the whole tree ends, as it would
// have at once without --hold, and the relay leaves a note beside its
// socket that it timed out. A Berth that comes back and goes again
// starts a new grace.
//
// Issue 29 item 2.
func TestRunHoldEndsTheTreeWhenNoBerthComesBack(t *testing.T) {
	h := startHeld(t, time.Second, tree)
	pids := readPids(t, h.handed.Stdout)
	h.drop()
	time.Sleep(300 * time.Millisecond)
	for _, pid := range pids {
		if !procfs.Alive(pid) {
			t.Fatalf("pid %d ended within the grace", pid)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	back, conn, err := client.Reattach(ctx, h.sock, h.token)
	if err != nil {
		t.Fatalf("coming back: %v", err)
	}
	back.Close()
	conn.Close() // gone again, without a signal: a new grace
	start := time.Now()
	code, _ := h.wait(t)
	if took := time.Since(start); took < 800*time.Millisecond {
		t.Errorf("the tree ended %v after the second drop, before the grace", took)
	}
	if code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit %d, want SIGTERM's", code)
	}
	assertGone(t, pids)
	if _, err := os.Lstat(h.sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the hold socket outlived the relay: %v", err)
	}
	if _, err := os.Lstat(h.sock + client.ExpiredSuffix); err != nil {
		t.Errorf("no note that the relay timed out: %v", err)
	}
}

// A signal is an orderly stop: the tree ends at once, held or not, and
// nothing is left to come back to.
//
// Issue 29 item 2.
func TestRunHoldEndsAtOnceOnASignal(t *testing.T) {
	h := startHeld(t, time.Minute, tree)
	pids := readPids(t, h.handed.Stdout)
	start := time.Now()
	if err := client.NewFrameWriter(h.stdin).Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	h.stdin.Close()
	if code, _ := h.wait(t); code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit %d, want SIGTERM's", code)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the orderly stop took %v", took)
	}
	assertGone(t, pids)
	if _, err := os.Lstat(h.sock + client.ExpiredSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an orderly stop left a note that it timed out: %v", err)
	}
}

// A hold socket the relay cannot make (a directory of another mode)
// leaves the program running unheld, and the handover says why.
//
// Issue 29 item 2.
func TestRunHoldSaysWhyItCannotHold(t *testing.T) {
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o755)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	theirs := os.NewFile(uintptr(fds[1]), "theirs")
	argv := client.RunArgs(relayBin, client.RunOptions{Stdin: client.StdinFramed, Grace: 100 * time.Millisecond,
		Hold: time.Minute, HoldSocket: filepath.Join(open, "x.sock"), ConnectFd: 3}, "sh", "-c", "cat")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.ExtraFiles = []*os.File{theirs}
	p := start(t, cmd)
	theirs.Close()
	p.stdin.Write([]byte(strings.Repeat("5a", 16) + "\n"))
	c, err := net.FileConn(os.NewFile(uintptr(fds[0]), "ours"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	handed, err := client.ReadHandover(c.(*net.UnixConn), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer handed.Close()
	if handed.Hold != "" || !strings.Contains(handed.HoldError, "mode 0755") {
		t.Fatalf("the handover %+v: want no hold, saying the directory's mode", handed.Hello)
	}
	p.stdin.Close() // unheld: the end of the control ends the run
	if code, _ := p.wait(t); code != 0 && code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit %d", code)
	}
}

// readPids reads "pid N" lines up to "ready" from r.
func readPids(t *testing.T, r *os.File) []int {
	t.Helper()
	p := &relayProc{out: bufio.NewReader(r), stderr: new(bytes.Buffer)}
	return p.pids(t)
}

// take runs "berth-relay take" for the hold at sock with token, passing
// on to a stdio socket of its own: what it passed on (nil when it exited
// first), its exit code and its stderr.
func take(t *testing.T, sock, token string) (*client.Handover, *net.UnixConn, int, string) {
	t.Helper()
	dir := t.TempDir()
	l, err := client.ListenStdio(dir, client.NewTag())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.UseToken(strings.Repeat("7b", 16))
	cmd := exec.Command(relayBin, client.TakeArgs(relayBin, sock, filepath.Join(dir, l.Name))[1:]...)
	cmd.Stdin = strings.NewReader(l.TokenLine() + token + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	code := make(chan int, 1)
	go func() {
		_ = cmd.Wait()
		code <- cmd.ProcessState.ExitCode()
		close(ended)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := l.Accept(ctx, ended)
	if err != nil {
		return nil, nil, <-code, stderr.String()
	}
	defer conn.Close()
	h, ctl, err := client.ReadTaken(conn, 10*time.Second)
	if err != nil {
		t.Fatalf("what take passed on: %v (stderr %q)", err, stderr.String())
	}
	return h, ctl, <-code, stderr.String()
}

// take, run where the hold socket is (inside a container), passes a
// held program's stdio and the relay's control on to Berth's stdio
// socket, its token read on stdin; it takes nothing, with an exit code
// that says why, from a relay that refuses its token (5), from a socket
// where no relay holds (3), and from one whose relay ended the program
// past its grace (4, once: it removes the relay's note).
//
// Issue 29 item 3 (in containers).
func TestTakePassesAHeldProgramOnToBerth(t *testing.T) {
	h := startHeld(t, 700*time.Millisecond, echoLines)
	out := bufio.NewReader(h.handed.Stdout)
	if l, _ := out.ReadString('\n'); l != "started\n" {
		t.Fatalf("read %q", l)
	}
	h.drop()
	if _, _, code, stderr := take(t, h.sock, strings.Repeat("00", 16)); code != 5 || !strings.Contains(stderr, "wrong token") {
		t.Fatalf("take with a wrong token: exit %d, %q; want 5 and the relay's refusal", code, stderr)
	}
	back, ctl, code, stderr := take(t, h.sock, h.token)
	if back == nil || code != 0 {
		t.Fatalf("take: exit %d, %q", code, stderr)
	}
	back.Stdin.Write([]byte("two\n"))
	if l, _ := bufio.NewReader(back.Stdout).ReadString('\n'); l != "got two\n" {
		t.Fatalf("after take, read %q", l)
	}
	// The control is the relay's: its end holds again, for the grace.
	ctl.Close()
	back.Close()
	h.wait(t)
	if _, _, code, stderr := take(t, h.sock, h.token); code != 4 || !strings.Contains(stderr, "within its grace") {
		t.Fatalf("take after the grace: exit %d, %q; want 4", code, stderr)
	}
	if _, _, code, stderr := take(t, h.sock, h.token); code != 3 || !strings.Contains(stderr, "no relay holds") {
		t.Fatalf("take again after the grace: exit %d, %q; want 3", code, stderr)
	}
}
