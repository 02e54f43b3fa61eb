package host

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/enclosuretest"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
	"github.com/berth-dev/berth/internal/errclass"
	"github.com/berth-dev/berth/internal/procfs"
)

// TestMain runs the tests under a relay built for them, as an installed
// Berth runs its processes.
func TestMain(m *testing.M) { relaytest.Main(m) }

func TestHostRunsAndReportsExit(t *testing.T) {
	p, err := New().Start(context.Background(), enclosure.Cmd{Path: "sh", Args: []string{"-c", "read x; echo got $x; echo err >&2; exit 3"}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(p.Stdin(), "hello\n")
	out, _ := io.ReadAll(p.Stdout())
	errOut, _ := io.ReadAll(p.Stderr())
	code, err := p.Wait()
	if string(out) != "got hello\n" || string(errOut) != "err\n" || code != 3 || err != nil {
		t.Fatalf("out=%q err=%q code=%d werr=%v", out, errOut, code, err)
	}
}

func TestHostKillEndsTheWholeGroup(t *testing.T) {
	p, err := New().Start(context.Background(), enclosure.Cmd{Path: "sh", Args: []string{"-c", "sleep 60 & echo $!; wait"}})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	n, _ := p.Stdout().Read(buf)
	child, _ := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if !procfs.Alive(child) {
		t.Fatalf("child %d not running", child)
	}
	p.Kill()
	select {
	case <-p.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("process did not end after Kill")
	}
	deadline := time.Now().Add(2 * time.Second)
	for procfs.Alive(child) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if procfs.Alive(child) {
		t.Fatalf("grandchild %d outlived Kill", child)
	}
}

// TestHostKillReturnsOnceTheTreeIsReaped: when Wait returns after Kill,
// the program and everything it started are gone from the process
// table, zombies included, not left to this machine's init to reap a
// moment later. A run's end, which waits for its processes, then leaves
// none behind. (Issue 28's prebuild tests met the moment.)
func TestHostKillReturnsOnceTheTreeIsReaped(t *testing.T) {
	for round := range 20 {
		p, err := New().Start(context.Background(), enclosure.Cmd{Path: "sh", Stderr: io.Discard,
			Args: []string{"-c", "sleep 60 & echo $!; setsid sleep 60 & echo $!; wait"}})
		if err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(p.Stdout())
		pids := []int{p.Pid()}
		for range 2 {
			l, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("reading a child's pid: %v", err)
			}
			pid, _ := strconv.Atoi(strings.TrimSpace(l))
			pids = append(pids, pid)
		}
		for _, pid := range pids[1:] {
			for deadline := time.Now().Add(2 * time.Second); !procfs.Alive(pid); time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("child %d never ran", pid)
				}
			}
		}
		p.Kill()
		if code, _ := p.Wait(); code != -1 {
			t.Errorf("Wait after Kill: exit %d, want -1", code)
		}
		for _, pid := range pids {
			if ps, ok := procfs.Read(pid); ok {
				t.Fatalf("round %d: process %d is still in the process table (state %c) when Wait returned after Kill", round, pid, ps.State)
			}
		}
	}
}

// TestHostKillEndsARelayThatDoesNotReap: a relay that cannot reap (here
// stopped) is killed once relayReapWait has passed, and Wait returns.
func TestHostKillEndsARelayThatDoesNotReap(t *testing.T) {
	p, err := New().Start(context.Background(), enclosure.Cmd{Path: "sleep", Args: []string{"60"}})
	if err != nil {
		t.Fatal(err)
	}
	h, ok := p.(*handle)
	if !ok || !h.relayed {
		t.Fatalf("not a relayed host process: %T", p)
	}
	relayPid := h.cmd.Process.Pid
	prog := p.Pid() // the relay has started it: there is a tree to reap
	if prog <= 0 {
		t.Fatal("the relay started no program")
	}
	if err := syscall.Kill(relayPid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	p.Kill()
	select {
	case <-p.Done():
	case <-time.After(relayReapWait + 5*time.Second):
		_ = syscall.Kill(relayPid, syscall.SIGKILL)
		t.Fatal("Wait never returned after Kill of a stopped relay")
	}
	if took := time.Since(killed); took < relayReapWait {
		t.Errorf("Wait returned after %v, before relayReapWait (%v): the stopped relay was not left its time", took, relayReapWait)
	}
	if procfs.Alive(relayPid) {
		t.Errorf("the relay %d outlived its Kill", relayPid)
	}
	if procfs.Alive(prog) {
		t.Errorf("the program %d outlived its Kill", prog)
	}
}

// TestHostKillRightAfterStartEndsWhatTheProgramStarts: a Kill that comes
// before the relay has started the program (Start returns once the relay
// runs) kills the program once it has, and what it starts, so Wait
// returns at once and leaves nothing. (A prebuild's context can end the
// moment it started.)
func TestHostKillRightAfterStartEndsWhatTheProgramStarts(t *testing.T) {
	for round := range 10 {
		mark := fmt.Sprintf("%d", 600000+round*1000+os.Getpid()%1000)
		p, err := New().Start(context.Background(), enclosure.Cmd{Path: "sh", Stderr: io.Discard,
			Args: []string{"-c", "sleep " + mark + " & wait"}})
		if err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		p.Kill()
		done := make(chan struct{})
		go func() { p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(relayReapWait + 10*time.Second):
			t.Fatalf("round %d: Wait never returned after a Kill right after Start", round)
		}
		if took := time.Since(killed); took >= relayReapWait {
			t.Errorf("round %d: Wait returned %v after a Kill right after Start: the relay's bound, not the relay's reaping", round, took)
		}
		for _, ps := range procfs.All() {
			if ps.Live() && strings.Contains(ps.Cmdline(), "sleep "+mark) {
				_ = syscall.Kill(ps.PID, syscall.SIGKILL)
				t.Fatalf("round %d: %q (pid %d) outlived a Kill right after Start", round, ps.Cmdline(), ps.PID)
			}
		}
	}
}

// TestHostKillOfAProcessTakenBackReturnsOnceTheTreeIsReaped: the same
// for a process a Berth that went away left to its relay, and this one
// took back: its relay is no child of this Berth, and it still reaps the
// tree before it says the exit.
func TestHostKillOfAProcessTakenBackReturnsOnceTheTreeIsReaped(t *testing.T) {
	e := New()
	keep := &enclosure.Keep{Kind: "test", Token: fmt.Sprintf("%032x", time.Now().UnixNano()), Grace: 30 * time.Second,
		Dir: filepath.Join(t.TempDir(), "relays")}
	p, err := e.Start(context.Background(), enclosure.Cmd{Path: "sh", Keep: keep, Stderr: io.Discard,
		Args: []string{"-c", "sleep 60 & echo $!; wait"}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := bufio.NewReader(p.Stdout()).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the child's pid: %v", err)
	}
	child, _ := strconv.Atoi(strings.TrimSpace(l))
	prog := p.Pid()
	socket, _, why := p.(enclosure.Kept).Held()
	if socket == "" {
		t.Fatalf("the process is not held: %s", why)
	}
	p.(enclosure.Dropper).Drop()
	var back enclosure.Process
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		back, err = e.Reattach(context.Background(), enclosure.Hold{Socket: socket, Token: keep.Token})
		if err == nil || !strings.Contains(err.Error(), "another Berth is attached") || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("taking it back: %v", err)
	}
	back.Kill()
	back.Wait()
	for _, pid := range []int{prog, child} {
		if ps, ok := procfs.Read(pid); ok {
			t.Fatalf("process %d is still in the process table (state %c) when Wait returned after Kill", pid, ps.State)
		}
	}
}

func TestHostKillReachesDescendantsInOtherGroups(t *testing.T) {
	p, err := New().Start(context.Background(), enclosure.Cmd{Path: "sh", Args: []string{"-c", "setsid sleep 60 & echo $!; wait"}})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	n, _ := p.Stdout().Read(buf)
	child, _ := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	for deadline := time.Now().Add(2 * time.Second); !procfs.Alive(child) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	p.Kill()
	<-p.Done()
	deadline := time.Now().Add(2 * time.Second)
	for procfs.Alive(child) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if procfs.Alive(child) {
		t.Fatalf("descendant %d in its own session outlived Kill", child)
	}
}

func TestHostOrphansDieWithTheLeader(t *testing.T) {
	p, err := New().Start(context.Background(), enclosure.Cmd{Path: "sh", Args: []string{"-c", "sleep 60 >/dev/null & echo $!"}})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(p.Stdout())
	p.Wait()
	child, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	deadline := time.Now().Add(2 * time.Second)
	for procfs.Alive(child) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if procfs.Alive(child) {
		t.Fatalf("background child %d outlived its leader", child)
	}
}

func TestHostSignalReachesProcess(t *testing.T) {
	p, err := New().Start(context.Background(), enclosure.Cmd{Path: "sh", Args: []string{"-c", "trap 'echo int; exit 0' INT; echo ready; while :; do sleep 0.05; done"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	buf := make([]byte, 6)
	io.ReadFull(p.Stdout(), buf)
	if err := p.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(p.Stdout())
	if !strings.Contains(string(rest), "int") {
		t.Fatalf("after SIGINT: %q", rest)
	}
}

func TestHostLookPathAndDial(t *testing.T) {
	if _, err := New().LookPath(context.Background(), "definitely-not-a-command-xyz"); !errors.Is(err, enclosure.ErrNotFound) {
		t.Fatalf("LookPath missing = %v", err)
	}
	if _, err := New().Start(context.Background(), enclosure.Cmd{Path: "definitely-not-a-command-xyz"}); !errors.Is(err, enclosure.ErrNotFound) {
		t.Fatalf("Start missing = %v", err)
	}
	if _, err := New().Dial(context.Background(), 70000); err == nil {
		t.Fatal("Dial accepted port 70000")
	}
	// A path that names no file is not found, one that names a file
	// Berth may not run is permission, and the system's words stay
	// (issue 27 item 3).
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for path, class := range map[string]errclass.Class{filepath.Join(dir, "missing"): errclass.NotFound, plain: errclass.Permission} {
		_, err := New().Start(context.Background(), enclosure.Cmd{Path: path})
		if errclass.Of(err) != class || !strings.Contains(errclass.Say(err), path) {
			t.Errorf("Start %s = %v (class %q); want class %q naming the path", path, err, errclass.Of(err), class)
		}
	}
}

// A process's stdout pipe holds a large answer whole: the process writes
// 200 KiB and exits while nobody reads (through a default 64 KiB pipe it
// would wait for the reader at each 64 KiB), and every byte is there.
func TestHostStdoutHoldsALargeAnswer(t *testing.T) {
	const n = 200 << 10
	p, err := New().Start(context.Background(), enclosure.Cmd{Path: "head", Args: []string{"-c", strconv.Itoa(n), "/dev/zero"}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Stdin().Close()
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		_ = p.Kill()
		t.Fatal("the process did not finish writing 200 KiB with nobody reading: the pipe was not grown")
	}
	out, err := io.ReadAll(p.Stdout())
	if err != nil || len(out) != n {
		t.Fatalf("read %d bytes (%v), want %d", len(out), err, n)
	}
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
}

// Issue 11 item 6.
func TestSecretsDoNotReachChildren(t *testing.T) {
	t.Setenv("BERTH_TOKEN", "the-token")
	t.Setenv("BERTH_TEST_DROPPED", "dropped")
	t.Setenv("BERTH_TEST_KEPT", "kept")
	p, err := NewWith(Options{Drop: []string{"BERTH_TEST_DROPPED"}}).Start(context.Background(), enclosure.Cmd{Path: "env", Env: []string{"BERTH_TEST_GIVEN=given"}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(p.Stdout())
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	env := string(out)
	for _, gone := range []string{"BERTH_TOKEN=", "the-token", "BERTH_TEST_DROPPED="} {
		if strings.Contains(env, gone) {
			t.Errorf("the child sees %q", gone)
		}
	}
	for _, kept := range []string{"BERTH_TEST_KEPT=kept\n", "BERTH_TEST_GIVEN=given\n"} {
		if !strings.Contains(env, kept) {
			t.Errorf("the child does not see %q", kept)
		}
	}
}

// Stop's grace: a process that ends when asked ends by itself (its exit
// code is its own), one that ignores the request is killed after the
// grace, and either way Stop returns once it has exited (issue 13 item 1).
func TestStopAsksThenKills(t *testing.T) {
	polite, err := New().Start(context.Background(), enclosure.Cmd{Path: "sh", Args: []string{"-c", "cat >/dev/null; exit 7"}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	enclosure.StopFunc(polite, func() { _ = polite.Stdin().Close() }, time.Minute)
	if code, err := polite.Wait(); code != 7 || err != nil {
		t.Errorf("a process that ends on EOF: exit %d (%v), want its own 7", code, err)
	}

	stubborn, err := New().Start(context.Background(), enclosure.Cmd{Path: "sh", Args: []string{"-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := io.ReadFull(stubborn.Stdout(), buf); err != nil {
		t.Fatal(err)
	}
	enclosure.Stop(stubborn, nil, 100*time.Millisecond)
	select {
	case <-stubborn.Done():
	default:
		t.Fatal("Stop returned before the process exited")
	}
	if code, _ := stubborn.Wait(); code != -1 {
		t.Errorf("a process that ignores SIGTERM: exit %d, want -1 (killed)", code)
	}
}

// Every host process runs under the relay (issue 13 item 3): Pid is the
// program's, whose parent is the relay; SIGINT reaches the program
// through it, and the exit code is the program's.
func TestHostProcessesRunUnderTheRelay(t *testing.T) {
	p, err := New().Start(context.Background(), enclosure.Cmd{Path: "sh", Args: []string{"-c", "trap 'echo int; exit 4' INT; echo ready; while :; do sleep 0.05; done"}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	buf := make([]byte, 6)
	if _, err := io.ReadFull(p.Stdout(), buf); err != nil {
		t.Fatal(err)
	}
	prog, ok := procfs.Read(p.Pid())
	if !ok {
		t.Fatalf("pid %d: no such process", p.Pid())
	}
	if parent, _ := procfs.Read(prog.PPID); !strings.Contains(parent.Cmdline(), relay.Name+" run") {
		t.Fatalf("the program's parent is %q, want the relay", parent.Cmdline())
	}
	if err := p.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(p.Stdout())
	if code, err := p.Wait(); !strings.Contains(string(rest), "int") || code != 4 || err != nil {
		t.Fatalf("after SIGINT: %q, exit %d (%v); want the program's trap and its code 4", rest, code, err)
	}
}

// Without a relay the host still runs processes, as the README's first
// command (go run) needs, and says once what that costs (issue 13 item 3).
func TestHostWithoutTheRelayWarnsOnce(t *testing.T) {
	var logged bytes.Buffer
	e := NewWith(Options{
		Relay: func() (*relay.Binary, error) { return nil, errors.New("berth-relay not found") },
		Log:   slog.New(slog.NewTextHandler(&logged, nil)),
	})
	for range 2 {
		p, err := e.Start(context.Background(), enclosure.Cmd{Path: "echo", Args: []string{"hi"}, Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(p.Stdout())
		if code, err := p.Wait(); string(out) != "hi\n" || code != 0 || err != nil {
			t.Fatalf("without the relay: %q, exit %d (%v)", out, code, err)
		}
	}
	if n := strings.Count(logged.String(), "without berth-relay"); n != 1 {
		t.Fatalf("warned %d times, want once:\n%s", n, logged.String())
	}
}

// The host enclosure keeps the enclosure contract (issue 27 item 2). It
// cannot be stopped, removed or have a silent engine, and carries no
// relay to install: the harness declares those, and the Kubernetes
// stand-in runs them.
func TestHostKeepsTheEnclosureContract(t *testing.T) {
	enclosuretest.Run(t, harness{enclosuretest.Base{Driver: "host"}})
}

type harness struct{ enclosuretest.Base }

func (harness) Driver(t *testing.T, via string) enclosure.Driver { return driver{New()} }

func (harness) Make(t *testing.T, o enclosuretest.Options) (string, error) {
	if o.Relay != enclosuretest.RelayBaked {
		return "", enclosuretest.ErrUnsupported
	}
	return ID, nil
}

func (harness) Stop(*testing.T, string) error   { return enclosuretest.ErrUnsupported }
func (harness) Remove(*testing.T, string) error { return enclosuretest.ErrUnsupported }
func (harness) Engine() (string, string, error) { return "", "", enclosuretest.ErrUnsupported }

// Processes are every process's command line on the host.
func (harness) Processes(t *testing.T, _ string) []string {
	var ps []string
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
			ps = append(ps, strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " "))
		}
	}
	return ps
}

// driver attaches to the host alone, as run/start's "host" does.
type driver struct{ host *Enclosure }

func (driver) Name() string { return "host" }

func (d driver) Attach(_ context.Context, id string) (enclosure.Enclosure, error) {
	if id != ID {
		return nil, fmt.Errorf("no host enclosure %q: %w", id, enclosure.ErrNotFound)
	}
	return d.host, nil
}

func (driver) Find(context.Context, string) ([]string, error) { return nil, nil }

func (harness) Misled(*testing.T, string, string, *slog.Logger) (enclosure.Driver, error) {
	return nil, enclosuretest.ErrUnsupported
}
