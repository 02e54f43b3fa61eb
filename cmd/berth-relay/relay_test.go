//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	client "github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relay/wire"
	"github.com/berth-dev/berth/internal/procfs"
)

// relayBin is the relay as the images carry it: built with CGO_ENABLED=0.
var relayBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "berth-relay-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	relayBin = filepath.Join(dir, "berth-relay")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-trimpath", "-o", relayBin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the relay: %v\n%s", err, out)
		os.Exit(1)
	}
	// goleak exits by itself: the clean-up must run inside it.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// relayProc is a running relay with its stdin and stdout as pipes.
type relayProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
	stderr *bytes.Buffer
}

func startRelay(t *testing.T, args ...string) *relayProc {
	t.Helper()
	return start(t, exec.Command(relayBin, args...))
}

func start(t *testing.T, cmd *exec.Cmd) *relayProc {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &relayProc{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout), stderr: new(bytes.Buffer)}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return p
}

// line reads one line of the relay's stdout.
func (p *relayProc) line(t *testing.T) string {
	t.Helper()
	s, err := p.out.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the relay's stdout: %v (read %q; stderr %q)", err, s, p.stderr)
	}
	return strings.TrimSuffix(s, "\n")
}

// pids reads "pid N" lines up to "ready" and returns the Ns.
func (p *relayProc) pids(t *testing.T) []int {
	t.Helper()
	var pids []int
	for {
		l := p.line(t)
		if l == "ready" {
			return pids
		}
		n, err := strconv.Atoi(strings.TrimPrefix(l, "pid "))
		if err != nil {
			t.Fatalf("unexpected line %q", l)
		}
		pids = append(pids, n)
	}
}

// wait reads stdout to EOF and returns the relay's exit code.
func (p *relayProc) wait(t *testing.T) (int, string) {
	t.Helper()
	rest, _ := io.ReadAll(p.out)
	if err := p.cmd.Wait(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatal(err)
		}
	}
	return p.cmd.ProcessState.ExitCode(), string(rest)
}

// tree is a PROG that starts a child in its group and one in a session of
// its own, prints their pids and its own, and waits.
const tree = `sleep 600 & echo pid $!; setsid sleep 600 & echo pid $!; echo pid $$; echo ready; wait`

func assertGone(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		if procfs.Alive(pid) {
			p, _ := procfs.Read(pid)
			t.Errorf("process %v outlived the relay", p)
		}
	}
}

func TestRunExitCodes(t *testing.T) {
	notExec := filepath.Join(t.TempDir(), "notexec")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"exit status", []string{"run", "--", "sh", "-c", "exit 7"}, 7, ""},
		{"killed by a signal", []string{"run", "--", "sh", "-c", "kill -KILL $$"}, 128 + 9, ""},
		{"not found", []string{"run", "--", "no-such-program-berth"}, 127, "no-such-program-berth"},
		{"not executable", []string{"run", "--", notExec}, 126, "permission denied"},
		{"no program", []string{"run", "--"}, 125, "no program given"},
		{"bad stdin mode", []string{"run", "--stdin", "lines", "--", "true"}, 125, "--stdin is raw, framed or inherit"},
		{"env without =", []string{"run", "--env", "GREETING", "--", "true"}, 125, `--env "GREETING" is not KEY=VALUE`},
		{"env without a name", []string{"run", "--env", "=hi", "--", "true"}, 125, `--env "=hi" is not KEY=VALUE`},
		{"connect with inherit", []string{"run", "--connect", "/x.sock", "--stdin", "inherit", "--", "true"}, 125, "--connect gives PROG a socket"},
		{"connect without token-stdin", []string{"run", "--connect", "/x.sock", "--", "true"}, 125, "--connect takes its token as the first line of stdin: give --token-stdin"},
		{"token-stdin without connect", []string{"run", "--token-stdin", "--", "true"}, 125, "--token-stdin is --connect's token"},
		{"hold without a socket", []string{"run", "--hold", "1m", "--stdin", "framed", "--connect-fd", "3", "--token-stdin", "--", "true"}, 125, "--hold listens on --hold-socket"},
		{"hold without a handover", []string{"run", "--hold", "1m", "--hold-socket", "/x.sock", "--stdin", "framed", "--token-stdin", "--", "true"}, 125, "give --connect or --connect-fd"},
		{"hold without its token", []string{"run", "--hold", "1m", "--hold-socket", "/x.sock", "--stdin", "framed", "--connect-fd", "3", "--", "true"}, 125, "--hold takes its token as the first line of stdin"},
		{"hold with raw stdin", []string{"run", "--hold", "1m", "--hold-socket", "/x.sock", "--connect-fd", "3", "--token-stdin", "--", "true"}, 125, "give --stdin framed"},
		{"hold-socket without hold", []string{"run", "--hold-socket", "/x.sock", "--", "true"}, 125, "--hold-socket is --hold's"},
		{"connect-fd without hold", []string{"run", "--connect-fd", "3", "--", "true"}, 125, "give --hold too"},
		{"missing dir", []string{"run", "--dir", "/no/such/dir", "--", "true"}, 126, "the working directory /no/such/dir: no such file or directory"},
		{"unknown mode", []string{"launch"}, 125, `unknown mode "launch"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := startRelay(t, c.args...)
			code, _ := p.wait(t)
			if code != c.code || !strings.Contains(p.stderr.String(), c.stderr) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, p.stderr, c.code, c.stderr)
			}
		})
	}
}

// TestRunDirAndEnv: --dir and --env set PROG's working directory and
// variables without a shell; a later --env of a name wins, a given PATH
// is the one PROG is looked up in, and a relative PROG is found from the
// directory, as after "cd D; export K=V; exec PROG".
func TestRunDirAndEnv(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\npwd\necho \"$GREETING|$SPACED\"\n"
	for _, f := range []string{filepath.Join(bin, "greet"), filepath.Join(dir, "local")} {
		if err := os.WriteFile(f, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	want := dir + "\nhi|a b  c\n"
	for name, tail := range map[string][]string{
		"on the given PATH": {"--env", "PATH=" + bin + ":/usr/bin:/bin", "--", "greet"},
		"relative to dir":   {"--", "./local"},
	} {
		t.Run(name, func(t *testing.T) {
			argv := append([]string{"run", "--dir", dir, "--env", "GREETING=bye", "--env", "GREETING=hi", "--env", "SPACED=a b  c"}, tail...)
			p := startRelay(t, argv...)
			p.stdin.Close()
			code, out := p.wait(t)
			if code != 0 || out != want {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and %q", code, out, p.stderr, want)
			}
		})
	}
}

func TestRunPassesStdioThrough(t *testing.T) {
	p := startRelay(t, "run", "--", "sh", "-c", "cat; echo to-stderr >&2")
	io.WriteString(p.stdin, "hello\n")
	if l := p.line(t); l != "hello" {
		t.Fatalf("got %q", l)
	}
	p.stdin.Close()
	code, rest := p.wait(t)
	if code != 0 || rest != "" || p.stderr.String() != "to-stderr\n" {
		t.Fatalf("exit %d, rest %q, stderr %q", code, rest, p.stderr)
	}
}

// TestRunConnect: with --connect, PROG's stdin and stdout are the socket
// (no pipe of the relay's between), the relay's stdin still carries its
// signals and its EOF, and the token is gone from PROG's environment. A
// socket path longer than an address holds is reached too, and a socket
// nobody listens on fails the relay before PROG runs.
func TestRunConnect(t *testing.T) {
	short := t.TempDir()
	long := filepath.Join(short, strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(long, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, dir := range map[string]string{"short path": short, "long path": long} {
		t.Run(name, func(t *testing.T) {
			tag := client.NewTag()
			l, err := client.ListenStdio(dir, tag)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			sock := filepath.Join(dir, l.Name)
			prog := `readlink /proc/self/fd/0 /proc/self/fd/1; echo "token=${BERTH_RELAY_TOKEN:-none}"; cat; echo after-eof`
			cmd := exec.Command(relayBin, client.RunArgs("", client.RunOptions{Stdin: client.StdinFramed, Connect: sock}, "sh", "-c", prog)[1:]...)
			p := start(t, cmd)
			io.WriteString(p.stdin, l.TokenLine())
			conn, err := l.Accept(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the socket's name is still there after Accept: %v", err)
			}
			r := bufio.NewReader(conn)
			for i := 0; i < 2; i++ {
				if l, _ := r.ReadString('\n'); !strings.HasPrefix(l, "socket:[") {
					t.Fatalf("PROG's fd %d is %q, not the socket", i, l)
				}
			}
			if l, _ := r.ReadString('\n'); l != "token=none\n" {
				t.Fatalf("PROG's environment: %q", l)
			}
			io.WriteString(conn, "through the socket\n")
			conn.CloseWrite() // PROG reads EOF; the relay's stdin stays open
			rest, _ := io.ReadAll(r)
			if string(rest) != "through the socket\nafter-eof\n" {
				t.Fatalf("read %q", rest)
			}
			p.stdin.Close()
			if code, out := p.wait(t); code != 0 || out != "" {
				t.Fatalf("exit %d, the relay's stdout %q, stderr %q", code, out, p.stderr)
			}
		})
	}
	// The token is the first line of the relay's stdin, never on its
	// command line (nor in its environment: see above); the frames that
	// follow still reach the relay.
	t.Run("token on stdin", func(t *testing.T) {
		l, err := client.ListenStdio(short, client.NewTag())
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		argv := client.RunArgs("", client.RunOptions{Stdin: client.StdinFramed, Connect: filepath.Join(short, l.Name)}, "sh", "-c", `readlink /proc/self/fd/1; echo "token=${BERTH_RELAY_TOKEN:-none}"; exec cat`)
		if !slices.Contains(argv, "--token-stdin") || slices.ContainsFunc(argv, func(a string) bool { return strings.Contains(a, strings.TrimSpace(l.TokenLine())) }) {
			t.Fatalf("the command line %q: want --token-stdin and no token", argv)
		}
		p := start(t, exec.Command(relayBin, argv[1:]...))
		io.WriteString(p.stdin, l.TokenLine())
		conn, err := l.Accept(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		if k, _ := r.ReadString('\n'); !strings.HasPrefix(k, "socket:[") {
			t.Fatalf("PROG's stdout is %q, not the socket", k)
		}
		if e, _ := r.ReadString('\n'); e != "token=none\n" {
			t.Fatalf("PROG's environment: %q", e)
		}
		if err := client.NewFrameWriter(p.stdin).Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code, out := p.wait(t); code != 128+int(syscall.SIGTERM) || out != "" {
			t.Fatalf("exit %d, the relay's stdout %q, stderr %q; want PROG ended by the framed SIGTERM", code, out, p.stderr)
		}
	})
	t.Run("stdin ends before the token", func(t *testing.T) {
		p := startRelay(t, "run", "--connect", filepath.Join(short, "none.sock"), "--token-stdin", "--", "sh", "-c", "echo ran")
		io.WriteString(p.stdin, "no newline")
		p.stdin.Close()
		if code, out := p.wait(t); code != wire.ExitRelayFailed || out != "" || !strings.Contains(p.stderr.String(), "stdin ended before the token's line") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, p.stderr)
		}
	})
	t.Run("a token line past the limit", func(t *testing.T) {
		p := startRelay(t, "run", "--connect", filepath.Join(short, "none.sock"), "--token-stdin", "--", "sh", "-c", "echo ran")
		io.WriteString(p.stdin, strings.Repeat("t", maxToken+1)+"\n")
		if code, out := p.wait(t); code != wire.ExitRelayFailed || out != "" || !strings.Contains(p.stderr.String(), "no newline in the first 256 bytes") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, p.stderr)
		}
	})
	t.Run("nobody listens", func(t *testing.T) {
		p := startRelay(t, "run", "--connect", filepath.Join(short, "none.sock"), "--token-stdin", "--", "sh", "-c", "echo ran")
		io.WriteString(p.stdin, "x\n")
		code, out := p.wait(t)
		if code != wire.ExitRelayFailed || out != "" || !strings.Contains(p.stderr.String(), "--connect") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, p.stderr)
		}
	})
}

func TestRunKillsTheTreeOnStdinEOF(t *testing.T) {
	p := startRelay(t, "run", "--grace", "50ms", "--", "sh", "-c", tree)
	pids := p.pids(t)
	p.stdin.Close()
	code, _ := p.wait(t)
	if code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit %d, want SIGTERM's (stderr %q)", code, p.stderr)
	}
	assertGone(t, pids)
}

func TestRunKillsTheTreeOnSIGTERM(t *testing.T) {
	p := startRelay(t, "run", "--grace", "50ms", "--", "sh", "-c", tree)
	pids := p.pids(t)
	p.cmd.Process.Signal(syscall.SIGTERM)
	code, _ := p.wait(t)
	if code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit %d, want SIGTERM's (stderr %q)", code, p.stderr)
	}
	assertGone(t, pids)
}

func TestRunKillsAfterTheGraceWhatIgnoresSIGTERM(t *testing.T) {
	p := startRelay(t, "run", "--grace", "50ms", "--", "sh", "-c", `trap "" TERM; `+tree)
	pids := p.pids(t)
	p.cmd.Process.Signal(syscall.SIGTERM)
	code, _ := p.wait(t)
	if code != 128+int(syscall.SIGKILL) {
		t.Fatalf("exit %d, want SIGKILL's (stderr %q)", code, p.stderr)
	}
	assertGone(t, pids)
}

func TestRunKillsWhatTheProgramLeftBehind(t *testing.T) {
	p := startRelay(t, "run", "--", "sh", "-c", `sleep 600 & echo pid $!; setsid sleep 600 & echo pid $!; echo ready; exit 3`)
	pids := p.pids(t)
	code, _ := p.wait(t) // the sleeps hold stdout: EOF means they are gone
	if code != 3 {
		t.Fatalf("exit %d, want 3 (stderr %q)", code, p.stderr)
	}
	assertGone(t, pids)
}

// SIGINT interrupts (a kernel lives on after it); only stdin EOF ends the
// program here, with SIGTERM after the grace.
func TestRunForwardsSIGINTWithoutKilling(t *testing.T) {
	p := startRelay(t, "run", "--grace", "50ms", "--", "sh", "-c",
		`trap "echo interrupted" INT; echo ready; while :; do sleep 600 & wait $!; done`)
	p.line(t)
	p.cmd.Process.Signal(syscall.SIGINT)
	if l := p.line(t); l != "interrupted" {
		t.Fatalf("got %q", l)
	}
	p.stdin.Close()
	if code, _ := p.wait(t); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit %d, want SIGTERM's: SIGINT must not end the program (stderr %q)", code, p.stderr)
	}
}

func TestRunKillsTheTreeWhenItsParentIsKilled(t *testing.T) {
	for _, mode := range []string{"raw", "inherit"} {
		t.Run(mode, func(t *testing.T) { killParent(t, mode) })
	}
}

// killParent: sh is the relay's parent. The test holds the relay's stdin
// open, so only the parent's death can end the tree.
func killParent(t *testing.T, stdinMode string) {
	cmd := exec.Command("sh", "-c", `echo pid $$; echo ready; "$0" run --stdin "$1" --grace 50ms -- sh -c "$TREE"`, relayBin, stdinMode)
	cmd.Env = append(os.Environ(), "TREE="+tree)
	parent := start(t, cmd)
	shPid := parent.pids(t)[0]
	pids := parent.pids(t) // the tree's, through the relay
	var relays []procfs.Process
	for _, p := range procfs.All() {
		if p.PPID == shPid {
			relays = append(relays, p)
		}
	}
	if len(relays) != 1 {
		t.Fatalf("want one relay under sh %d, found %v", shPid, procfs.Strings(relays))
	}
	parent.cmd.Process.Kill()
	parent.cmd.Wait()
	waitGone(t, relays[0].PID)
	assertGone(t, pids)
}

// PR_SET_PDEATHSIG fires when the thread that forked the relay exits,
// even while the parent process lives on (Go ends the thread of a locked
// goroutine that returns): the relay must not take that for its parent's
// death.
func TestRunOutlivesItsParentsForkingThread(t *testing.T) {
	// The shell waits for cat with the wait builtin, which a trapped signal
	// interrupts (a foreground cat would defer the trap until it ends); cat
	// runs in the background, where SIGINT is ignored, and reads the
	// shell's stdin through fd 3 (a background job's stdin is /dev/null).
	cmd := exec.Command(relayBin, "run", "--", "sh", "-c",
		`trap "echo interrupted" INT; echo ready; exec 3<&0; cat <&3 3<&- & while ! wait $!; do :; done; echo eof`)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	stderr := new(bytes.Buffer)
	cmd.Stderr = stderr
	tids := make(chan int, 1)
	started := make(chan error, 1)
	release := make(chan struct{})
	var fork func()
	fork = func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if unix.Gettid() == os.Getpid() {
			// The main thread is parked, not ended: fork from another,
			// which cannot be this one while this goroutine holds it.
			done := make(chan struct{})
			go func() { fork(); close(done) }()
			<-done
			runtime.UnlockOSThread()
			return
		}
		tids <- unix.Gettid()
		started <- cmd.Start()
		<-release // the relay has armed PR_SET_PDEATHSIG
	}
	go fork()
	tid := <-tids
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	p := &relayProc{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout), stderr: stderr}
	p.line(t)
	close(release)
	waitTaskGone(t, tid)
	p.cmd.Process.Signal(syscall.SIGINT)
	if l := p.line(t); l != "interrupted" {
		t.Fatalf("got %q", l)
	}
	p.stdin.Close()
	if code, out := p.wait(t); code != 0 || out != "eof\n" {
		t.Fatalf("exit %d, out %q: the relay ended its program when a thread of its parent exited", code, out)
	}
}

func waitTaskGone(t *testing.T, tid int) {
	t.Helper()
	task := "/proc/self/task/" + strconv.Itoa(tid)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(task); os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %d did not exit", tid)
		}
	}
}

// waitGone waits for an orphan, which the test cannot wait for, to end.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); procfs.Alive(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs", pid)
		}
	}
}

// --stdin inherit: PROG reads the relay's stdin itself. Its EOF is
// PROG's alone (the run goes on), a write after PROG closed it fails as
// it would to PROG directly, and signals still end the tree.
func TestRunInheritedStdin(t *testing.T) {
	t.Run("EOF reaches the program, which goes on", func(t *testing.T) {
		p := startRelay(t, "run", "--stdin", "inherit", "--grace", "50ms", "--", "sh", "-c", "cat; echo after-eof; sleep 0.3; echo still")
		io.WriteString(p.stdin, "hello\n")
		if l := p.line(t); l != "hello" {
			t.Fatalf("got %q", l)
		}
		p.stdin.Close()
		if code, out := p.wait(t); code != 0 || out != "after-eof\nstill\n" {
			t.Fatalf("exit %d, out %q, stderr %q: EOF of an inherited stdin must not end the run", code, out, p.stderr)
		}
	})
	t.Run("a write after the program closed its stdin fails", func(t *testing.T) {
		p := startRelay(t, "run", "--stdin", "inherit", "--grace", "50ms", "--", "sh", "-c", "exec 0<&-; echo closed; sleep 30")
		if l := p.line(t); l != "closed" {
			t.Fatalf("got %q", l)
		}
		var err error
		for i := 0; i < 100 && err == nil; i++ { // a pipe's buffer, at most, before EPIPE
			_, err = p.stdin.Write(make([]byte, 4096))
		}
		if !errors.Is(err, syscall.EPIPE) {
			t.Errorf("write after the program closed its stdin: %v, want EPIPE (the relay must not hold the read end)", err)
		}
		p.cmd.Process.Signal(syscall.SIGTERM)
		if code, _ := p.wait(t); code != 128+int(syscall.SIGTERM) {
			t.Fatalf("exit %d, want SIGTERM's (stderr %q)", code, p.stderr)
		}
	})
	t.Run("SIGTERM ends the tree", func(t *testing.T) {
		p := startRelay(t, "run", "--stdin", "inherit", "--grace", "50ms", "--", "sh", "-c", tree)
		pids := p.pids(t)
		p.cmd.Process.Signal(syscall.SIGTERM)
		if code, _ := p.wait(t); code != 128+int(syscall.SIGTERM) {
			t.Fatalf("exit %d, want SIGTERM's (stderr %q)", code, p.stderr)
		}
		assertGone(t, pids)
	})
}

func TestRunFramedStdin(t *testing.T) {
	frame := func(s string) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(s))), s...)
	}
	t.Run("an empty frame is EOF for the program only", func(t *testing.T) {
		p := startRelay(t, "run", "--stdin", "framed", "--", "sh", "-c", "cat; echo done")
		p.stdin.Write(frame("hel"))
		p.stdin.Write(frame("lo\n"))
		p.stdin.Write(frame(""))
		// The relay's own stdin stays open: cat ends on the empty frame.
		code, out := p.wait(t)
		if code != 0 || out != "hello\ndone\n" {
			t.Fatalf("exit %d, out %q, stderr %q", code, out, p.stderr)
		}
	})
	t.Run("EOF of the relay's stdin still ends the tree", func(t *testing.T) {
		p := startRelay(t, "run", "--stdin", "framed", "--grace", "50ms", "--", "sh", "-c", "cat >/dev/null; "+tree)
		p.stdin.Write(frame(""))
		pids := p.pids(t)
		p.stdin.Close()
		if code, _ := p.wait(t); code != 128+int(syscall.SIGTERM) {
			t.Fatalf("exit %d, want SIGTERM's (stderr %q)", code, p.stderr)
		}
		assertGone(t, pids)
	})
	t.Run("a signal frame acts as a caught signal, after the program's stdin closed too", func(t *testing.T) {
		p := startRelay(t, "run", "--stdin", "framed", "--grace", "50ms", "--", "sh", "-c",
			`trap "echo interrupted" INT; echo pid $$; echo ready; while :; do sleep 600 & wait $!; done`)
		pids := p.pids(t)
		fw := client.NewFrameWriter(p.stdin)
		if err := fw.Signal(syscall.SIGUSR1); !errors.Is(err, client.ErrNotFramed) {
			t.Fatalf("SIGUSR1: %v, want ErrNotFramed", err)
		}
		fw.Close()
		if err := fw.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		if l := p.line(t); l != "interrupted" {
			t.Fatalf("got %q", l)
		}
		if err := fw.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code, _ := p.wait(t); code != 128+int(syscall.SIGTERM) {
			t.Fatalf("exit %d, want SIGTERM's (stderr %q)", code, p.stderr)
		}
		assertGone(t, pids)
	})
}

func TestSignal(t *testing.T) {
	p := startRelay(t, "run", "--tag", "t1", "--grace", "50ms", "--", "sh", "-c",
		`trap "echo interrupted" INT; echo pid $$; echo ready; while :; do sleep 600 & wait $!; done`)
	prog := p.pids(t)[0]
	run := func(args ...string) (int, string) {
		out, err := exec.Command(relayBin, args...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if code, out := run("signal", "tag=t1", "INT"); code != 0 {
		t.Fatalf("signal tag=t1 INT: exit %d: %s", code, out)
	}
	if l := p.line(t); l != "interrupted" {
		t.Fatalf("got %q", l)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"signal", "tag=nope", "TERM"}, "no relay runs with --tag nope"},
		{[]string{"signal", "1", "TERM"}, "neither a process group id"},
		{[]string{"signal", "tag=t1", "BOGUS"}, `unknown signal "BOGUS"`},
	} {
		if code, out := run(c.args...); code != 125 || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, %q; want 125 and %q", c.args, code, out, c.want)
		}
	}
	// The program's group, by id: SIGTERM ends it, and the relay with it.
	if code, out := run("signal", strconv.Itoa(prog), "SIGTERM"); code != 0 {
		t.Fatalf("signal %d SIGTERM: exit %d: %s", prog, code, out)
	}
	if code, _ := p.wait(t); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit %d, want SIGTERM's (stderr %q)", code, p.stderr)
	}
}

func TestDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		// Reads to EOF (the relay half-closes on its stdin's EOF), then
		// answers and closes (the relay closes its stdout).
		b, _ := io.ReadAll(c)
		fmt.Fprintf(c, "got %q\n", b)
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	p := startRelay(t, "dial", "127.0.0.1:"+port)
	io.WriteString(p.stdin, "ping")
	p.stdin.Close()
	code, out := p.wait(t)
	if code != 0 || out != "got \"ping\"\n" {
		t.Fatalf("exit %d, out %q, stderr %q", code, out, p.stderr)
	}

	ln.Close() // nothing listens there now
	for _, c := range []struct {
		addr string
		code int
		want string
	}{
		{port, 1, "connection refused"},
		{"10.1.2.3:80", 125, "only a loopback address"},
		{"localhost:80", 125, "not PORT or a literal IP:PORT"},
	} {
		p := startRelay(t, "dial", c.addr)
		if code, _ := p.wait(t); code != c.code || !strings.Contains(p.stderr.String(), c.want) {
			t.Errorf("dial %s: exit %d, stderr %q; want %d and %q", c.addr, code, p.stderr, c.code, c.want)
		}
	}
}

// dial --ready tells a connection that is up from one being made before
// any byte flows (issue 13 item 3: Enclosure.Dial reports a refused
// connection as its error); a refused one says nothing of the kind.
func TestDialReadyTellsAnOpenConnectionFromARefusedOne(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	cmd := exec.Command(relayBin, "dial", "--ready", port)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil || line != wire.ReadyLine+"\n" {
		t.Fatalf("stderr's first line %q, %v; want %q", line, err, wire.ReadyLine)
	}
	c := <-accepted
	io.WriteString(c, "hello\n")
	if l, err := bufio.NewReader(stdout).ReadString('\n'); l != "hello\n" {
		t.Fatalf("read %q, %v through the relay", l, err)
	}
	c.Close()
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("dial: %v", err)
	}

	ln.Close()
	p := startRelay(t, "dial", "--ready", port)
	if code, _ := p.wait(t); code != 1 || strings.Contains(p.stderr.String(), wire.ReadyLine) || !strings.Contains(p.stderr.String(), "connection refused") {
		t.Fatalf("a refused dial --ready: exit %d, stderr %q", code, p.stderr)
	}
}

func TestWhich(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "berth-tool")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	which := func(name string) (int, string, string) {
		cmd := exec.Command(relayBin, "which", name)
		cmd.Env = []string{"PATH=/nonexistent:" + dir}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.Run()
		return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
	}
	if code, out, _ := which("berth-tool"); code != 0 || out != prog+"\n" {
		t.Fatalf("which berth-tool: exit %d, %q", code, out)
	}
	if code, out, errOut := which("sh"); code != 1 || out != "" || !strings.Contains(errOut, `"sh"`) || !strings.Contains(errOut, dir) {
		t.Fatalf("which sh with PATH=%s: exit %d, %q, %q", dir, code, out, errOut)
	}
}

func TestVersionIsTheBinarysHash(t *testing.T) {
	out, err := exec.Command(relayBin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(relayBin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if want := hex.EncodeToString(sum[:])[:16] + "\n"; string(out) != want {
		t.Fatalf("version %q, want %q", out, want)
	}
}

// The relay runs in containers with no libc of a known kind: it must be a
// static executable.
func TestRelayIsStatic(t *testing.T) {
	f, err := elf.Open(relayBin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Fatalf("the relay is dynamically linked (%v)", p.Type)
		}
	}
}

// mem tag=T prints the resident memory of what the tagged relay runs:
// its program and the program's children, whatever their group, read in
// /proc; an unknown tag is the relay's own failure.
func TestMemSumsWhatTheTaggedRelayRuns(t *testing.T) {
	p := startRelay(t, "run", "--tag", "mem1", "--", "sh", "-c", tree)
	pids := p.pids(t)
	out, err := exec.Command(relayBin, "mem", "tag=mem1").CombinedOutput()
	if err != nil {
		t.Fatalf("mem tag=mem1: %v: %s", err, out)
	}
	got, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatalf("mem printed %q, not a number", out)
	}
	var want int64
	for _, pid := range pids {
		n, ok := procfs.RSS(pid)
		if !ok {
			t.Fatalf("the memory of %d cannot be read", pid)
		}
		want += n
	}
	// Each process's memory moves a little between the two reads.
	if got < want/2 || got > want*2 {
		t.Errorf("mem says %d bytes; the three processes hold %d", got, want)
	}
	for _, args := range [][]string{{"mem", "tag=nope"}, {"mem"}, {"mem", "1"}} {
		out, err := exec.Command(relayBin, args...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 {
			t.Errorf("%v: %v %q; want exit 125", args, err, out)
		}
	}
	_ = p.stdin.Close()
	p.wait(t)
}
