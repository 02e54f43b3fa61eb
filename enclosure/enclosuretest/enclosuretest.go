// Package enclosuretest is the one conformance suite of the enclosure
// contract (enclosure.Driver, enclosure.Enclosure, enclosure.Process):
// Run drives a driver through a Harness, and every driver runs it (the
// host, Docker, containerd, the Kubernetes stand-in; the real cluster's
// harness needs only Make, Stop, Remove, Processes and Engine). The
// drivers' own tests keep only what is their own.
//
// A fault a harness cannot produce on demand (stopping the host, a real
// cluster's API server made silent) is declared by the harness: its
// method returns ErrUnsupported, the case says so in the log and passes,
// and the Kubernetes stand-in, which can produce every fault, runs it.
package enclosuretest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure"
)

// ErrUnsupported is a harness's answer for what it cannot do on demand.
var ErrUnsupported = errors.New("the harness cannot produce this on demand")

// Relay is how Make's enclosure offers the relay.
type Relay int

const (
	// RelayBaked: the image carries the relay (the default).
	RelayBaked Relay = iota
	// RelayStreamed: no relay in the image, but sh and a directory that
	// is writable and allows exec: the driver streams it in.
	RelayStreamed
	// RelayImpossible: nowhere to put a relay that runs (a read-only root
	// and only noexec tmpfs mounts): Attach fails naming what it tried.
	RelayImpossible
)

// Options say what enclosure Make makes.
type Options struct {
	// Conversation labels it berth.conversation=<Conversation>; "": no
	// label.
	Conversation string
	// Workdir, when set, is a directory of Berth's (from
	// Harness.Workdir) that the enclosure mounts read-write at
	// Harness.Inside.
	Workdir string
	Relay   Relay
}

// Harness is what Run needs of a driver and its engine.
type Harness interface {
	// Name is the driver's name, as run/start names it.
	Name() string
	// Driver returns a driver whose engine is reached at via, an address
	// on Engine's network ("": the engine itself), closed at the test's
	// end.
	Driver(t *testing.T, via string) enclosure.Driver
	// Make makes a running enclosure as o says, removed at the test's
	// end, and returns the id Attach takes; ErrUnsupported for what it
	// cannot make.
	Make(t *testing.T, o Options) (string, error)
	// Workdir is a fresh directory of Berth's that Make can mount (on the
	// volume a pod shares with Berth; Workdir(t) where any will do).
	Workdir(t *testing.T) string
	// Inside is where Make mounts Options.Workdir as the enclosure's
	// processes see it ("": at Berth's own path).
	Inside() string
	// Stop stops the enclosure (its processes end, it still exists);
	// Remove removes it. ErrUnsupported: the harness cannot.
	Stop(t *testing.T, id string) error
	Remove(t *testing.T, id string) error
	// Processes lists the command lines of the processes that run in the
	// enclosure.
	Processes(t *testing.T, id string) []string
	// Misled returns a driver whose Berth takes Make's workdir for the
	// directory elsewhere (enclosure.path_map, a workspace volume's path),
	// as a file system shared through a VM would show it: a relay cannot
	// reach the stdio socket Berth makes there. log takes its log.
	// ErrUnsupported: no socket to miss (the host).
	Misled(t *testing.T, workdir, elsewhere string, log *slog.Logger) (enclosure.Driver, error)
	// Engine is the network and address of the driver's engine, for a
	// proxy that can fall silent (Driver's via); ErrUnsupported: no
	// engine to silence.
	Engine() (network, address string, err error)
}

// Run runs the conformance suite against h.
func Run(t *testing.T, h Harness) {
	for _, c := range []struct {
		name string
		test func(*testing.T, Harness)
	}{
		{"Attach", testAttach},
		{"Auto", testAuto},
		{"Paths", testPaths},
		{"StartEachStdio", testStart},
		{"StdioFallsBack", testFallback},
		{"Signals", testSignals},
		{"KillLeavesNothing", testKill},
		{"HoldsForTheGrace", testHold},
		{"LookPath", testLookPath},
		{"Dial", testDial},
		{"DialAServerThatSpeaksFirst", testDialSpeaksFirst},
		{"Stopped", testStopped},
		{"Removed", testRemoved},
		{"SilentEngine", testSilent},
		{"RelayInstall", testRelay},
	} {
		t.Run(c.name, func(t *testing.T) { c.test(t, h) })
	}
}

// wait bounds each step of a case.
const wait = time.Minute

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return c
}

// declared logs a fault the harness declared it cannot produce.
func declared(t *testing.T, h Harness, what string, err error) bool {
	t.Helper()
	if errors.Is(err, ErrUnsupported) {
		t.Logf("%s: the %s harness cannot %s on demand (declared); the Kubernetes stand-in runs this case", t.Name(), h.Name(), what)
		return true
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return false
}

// Workdir is a fresh directory of the test's, with symlinks resolved.
func Workdir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// fixture is one attached enclosure with a workdir.
type fixture struct {
	h       Harness
	d       enclosure.Driver
	id      string
	enc     enclosure.Enclosure
	workdir string // Berth's
	inside  string // the enclosure's view of workdir
}

func attachNew(t *testing.T, h Harness, o Options) *fixture {
	t.Helper()
	if o.Workdir == "" {
		o.Workdir = h.Workdir(t)
	}
	id, err := h.Make(t, o)
	if err != nil {
		t.Fatalf("making an enclosure: %v", err)
	}
	f := &fixture{h: h, d: h.Driver(t, ""), id: id, workdir: o.Workdir, inside: h.Inside()}
	if f.inside == "" {
		f.inside = o.Workdir
	}
	if f.enc, err = f.d.Attach(ctx(t), id); err != nil {
		t.Fatalf("Attach(%q): %v", id, err)
	}
	return f
}

func (f *fixture) start(t *testing.T, cmd enclosure.Cmd) enclosure.Process {
	t.Helper()
	p, err := f.enc.Start(ctx(t), cmd)
	if err != nil {
		t.Fatalf("Start %s %q: %v", cmd.Path, cmd.Args, err)
	}
	t.Cleanup(func() { _ = p.Kill(); <-p.Done() })
	return p
}

func testAttach(t *testing.T, h Harness) {
	f := attachNew(t, h, Options{})
	if f.enc.Driver() != h.Name() {
		t.Errorf("Driver() = %q, want %q", f.enc.Driver(), h.Name())
	}
	again, err := f.d.Attach(ctx(t), f.enc.ID())
	if err != nil || again.ID() != f.enc.ID() {
		t.Errorf("Attach(its own ID %q): %v, id %v", f.enc.ID(), err, again)
	}
	if f.enc.Capabilities().SharedFiles {
		return // the host: every id is "its" one or an error below
	}
	_, err = f.d.Attach(ctx(t), "berth-no-such-enclosure")
	if !errors.Is(err, enclosure.ErrNotFound) {
		t.Errorf("Attach(a missing enclosure) = %v, want ErrNotFound (ErrGone)", err)
	}
}

func testAuto(t *testing.T, h Harness) {
	conv := fmt.Sprintf("conv-%d", rand.Int64())
	f := attachNew(t, h, Options{Conversation: conv})
	hostEnc := fallback{}
	l := &enclosure.Lookup{Host: hostEnc, Drivers: map[string]enclosure.Driver{h.Name(): f.d}, Auto: []string{h.Name()}}
	got, err := l.Find(ctx(t), enclosure.Spec{Driver: "auto"}, conv)
	if err != nil {
		t.Fatalf("auto for %s: %v", conv, err)
	}
	if !f.enc.Capabilities().SharedFiles && got.ID() != f.enc.ID() {
		t.Errorf("auto for %s found %s %s, want %s", conv, got.Driver(), got.ID(), f.enc.ID())
	}
	got, err = l.Find(ctx(t), enclosure.Spec{Driver: "auto"}, conv+"-none")
	if err != nil || got != enclosure.Enclosure(hostEnc) {
		t.Errorf("auto for a conversation with no enclosure: %v, %v; want the host fallback", got, err)
	}
}

// fallback stands for the host in Auto's lookup.
type fallback struct{ enclosure.Enclosure }

func (fallback) ID() string { return "fallback" }

func testPaths(t *testing.T, h Harness) {
	f := attachNew(t, h, Options{})
	file := filepath.Join(f.workdir, "src", "main.go")
	in, err := f.enc.MapPath(file)
	if want := path.Join(f.inside, "src", "main.go"); err != nil || in != want {
		t.Fatalf("MapPath(%s) = %q, %v; want %q", file, in, err, want)
	}
	if back, err := f.enc.HostPath(in); err != nil || back != file {
		t.Fatalf("HostPath(%s) = %q, %v; want %q", in, back, err, file)
	}
	if err := f.enc.Writable(file); err != nil {
		t.Errorf("Writable(%s) on a read-write mount: %v", file, err)
	}
	if f.enc.Capabilities().SharedFiles {
		return // every path is the enclosure's own
	}
	outside := filepath.Join(os.TempDir(), "berth-not-mounted", "x.go")
	if got, err := f.enc.MapPath(outside); err == nil {
		t.Errorf("MapPath(a path the enclosure does not mount) = %q, want an error", got)
	}
	if got, err := f.enc.HostPath("/proc/self/berth-not-mounted"); !errors.Is(err, enclosure.ErrNotFound) {
		t.Errorf("HostPath(a path outside every mount) = %q, %v; want ErrNotFound", got, err)
	}
}

func testStart(t *testing.T, h Harness) {
	f := attachNew(t, h, Options{})
	for _, c := range []struct {
		name, dir string
		socket    bool // a socket where the enclosure's Berth shares dir
	}{{"workdir", f.inside, true}, {"elsewhere", "/", false}} {
		t.Run(c.name, func(t *testing.T) {
			socket := c.socket && !f.enc.Capabilities().SharedFiles
			p := f.start(t, enclosure.Cmd{Path: "sh", Dir: c.dir, Env: []string{"FOO=bar"},
				Args: []string{"-c", `for fd in 0 1; do k=$(readlink /proc/$$/fd/$fd); printf '%s ' "${k%%:*}"; done; echo; read x; echo "got $x in $PWD as $FOO"; echo to-stderr >&2; cat; echo after-eof; exit 3`}})
			io.WriteString(p.Stdin(), "hello\nmore\n")
			p.Stdin().Close() // the program reads EOF and goes on
			errc := make(chan []byte)
			go func() { b, _ := io.ReadAll(p.Stderr()); errc <- b }()
			out, _ := io.ReadAll(p.Stdout())
			errOut := <-errc
			code, err := p.Wait()
			kinds, rest, _ := strings.Cut(string(out), "\n")
			if want := map[bool]string{true: "socket socket", false: "pipe pipe"}[socket]; strings.TrimSpace(kinds) != want {
				t.Errorf("stdin and stdout are %q, want %q", kinds, want)
			}
			if want := "got hello in " + c.dir + " as bar\nmore\nafter-eof\n"; rest != want || string(errOut) != "to-stderr\n" || code != 3 || err != nil {
				t.Fatalf("stdout %q, stderr %q, exit %d, %v; want %q, to-stderr, 3", rest, errOut, code, err, want)
			}
			// Cmd.Stderr takes stderr instead of a pipe.
			var stderr strings.Builder
			p = f.start(t, enclosure.Cmd{Path: "/bin/sh", Dir: c.dir, Stderr: &stderr, Args: []string{"-c", "echo out; echo oops >&2"}})
			if p.Stderr() != nil {
				t.Error("Stderr() is not nil with Cmd.Stderr set")
			}
			out, _ = io.ReadAll(p.Stdout())
			if code, err := p.Wait(); code != 0 || err != nil || string(out) != "out\n" || stderr.String() != "oops\n" {
				t.Fatalf("with Cmd.Stderr: stdout %q, stderr %q, exit %d, %v", out, stderr.String(), code, err)
			}
			if _, err := f.enc.Start(ctx(t), enclosure.Cmd{Path: "berth-no-such-program", Dir: c.dir}); !errors.Is(err, enclosure.ErrNotFound) {
				t.Errorf("Start(a missing program) = %v, want ErrNotFound", err)
			}
		})
	}
}

func testFallback(t *testing.T, h Harness) {
	wd, elsewhere := h.Workdir(t), Workdir(t)
	var log strings.Builder
	d, err := h.Misled(t, wd, elsewhere, slog.New(slog.NewTextHandler(&log, nil)))
	if declared(t, h, "mislead Berth about the workdir", err) {
		return
	}
	id, err := h.Make(t, Options{Workdir: wd})
	if err != nil {
		t.Fatal(err)
	}
	enc := Attach[enclosure.Enclosure](t, d, id)
	dir := h.Inside()
	for i := range 2 {
		p := startEcho(t, enc, dir)
		if kinds, echo := p(); kinds != "pipe pipe" || echo != "echoed" {
			t.Fatalf("start %d: stdin and stdout %q, echo %q; want the exec's pipes", i, kinds, echo)
		}
	}
	key := h.Name() + ".stdio"
	if strings.Count(log.String(), "could not connect to its stdio socket") != 1 || !strings.Contains(log.String(), key+": exec") {
		t.Fatalf("the log says the socket was given up %d times, naming %s: %q", strings.Count(log.String(), "could not connect to its stdio socket"), key, log.String())
	}
	for _, d := range []string{wd, elsewhere} {
		if left, _ := filepath.Glob(filepath.Join(d, ".berth-*")); len(left) != 0 {
			t.Errorf("left in %s: %v", d, left)
		}
	}
}

// StdioKinds starts, in dir of enc, a program that says what its stdin
// and stdout are ("socket" or "pipe", as "socket socket"), then echoes
// its stdin, and returns the kinds and the echo of "echoed": how a
// container driver carried that start's stdio.
func StdioKinds(t *testing.T, enc enclosure.Enclosure, dir string) (kinds, echo string) {
	t.Helper()
	return startEcho(t, enc, dir)()
}

// startEcho starts, in dir, a program that prints what its stdin and
// stdout are ("socket" or "pipe") and then echoes its stdin; the func it
// returns writes "echoed", closes stdin, and returns the kinds and the
// echo.
func startEcho(t *testing.T, enc enclosure.Enclosure, dir string) func() (kinds, echo string) {
	t.Helper()
	p, err := enc.Start(ctx(t), enclosure.Cmd{Path: "sh", Dir: dir, Stderr: io.Discard,
		Args: []string{"-c", `for fd in 0 1; do k=$(readlink /proc/$$/fd/$fd); printf '%s ' "${k%%:*}"; done; echo; cat`}})
	if err != nil {
		t.Fatal(err)
	}
	return func() (string, string) {
		r := bufio.NewReader(p.Stdout())
		kinds, _ := r.ReadString('\n')
		io.WriteString(p.Stdin(), "echoed")
		p.Stdin().Close()
		rest, _ := io.ReadAll(r)
		if code, err := p.Wait(); code != 0 || err != nil {
			t.Fatalf("exit %d, %v", code, err)
		}
		return strings.TrimSpace(kinds), string(rest)
	}
}

func testSignals(t *testing.T, h Harness) {
	f := attachNew(t, h, Options{})
	p := f.start(t, enclosure.Cmd{Path: "sh", Dir: f.inside, Stderr: io.Discard,
		Args: []string{"-c", `trap 'echo got INT' INT; echo ready; while :; do sleep 0.1; done`}})
	r := bufio.NewReader(p.Stdout())
	if l, err := r.ReadString('\n'); l != "ready\n" {
		t.Fatalf("read %q, %v", l, err)
	}
	if err := p.Signal(syscall.SIGINT); err != nil {
		t.Fatalf("Signal(SIGINT): %v", err)
	}
	if l, err := r.ReadString('\n'); l != "got INT\n" {
		t.Fatalf("after SIGINT: read %q, %v", l, err)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("Signal(SIGTERM): %v", err)
	}
	select {
	case <-p.Done():
	case <-time.After(wait):
		t.Fatal("SIGTERM did not end the program")
	}
	if err := p.Signal(syscall.SIGINT); err == nil {
		t.Error("Signal after the exit: nil, want an error saying it exited")
	}
}

func testKill(t *testing.T, h Harness) {
	f := attachNew(t, h, Options{})
	for _, dir := range []string{f.inside, "/"} {
		n := 600000 + rand.IntN(300000)
		marks := []string{fmt.Sprintf("sleep %d", n), fmt.Sprintf("sleep %d", n+1)}
		p := f.start(t, enclosure.Cmd{Path: "sh", Dir: dir, Stderr: io.Discard,
			Args: []string{"-c", fmt.Sprintf(`%s & setsid %s & echo ready; wait`, marks[0], marks[1])}})
		if l, err := bufio.NewReader(p.Stdout()).ReadString('\n'); l != "ready\n" {
			t.Fatalf("read %q, %v", l, err)
		}
		running := func() []string {
			var left []string
			for _, ps := range h.Processes(t, f.id) {
				for _, m := range marks {
					if strings.Contains(ps, m) {
						left = append(left, ps)
					}
				}
			}
			return left
		}
		for deadline := time.Now().Add(wait); len(running()) < 2; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the tree did not start: %q", running())
			}
		}
		if err := p.Kill(); err != nil {
			t.Fatalf("Kill: %v", err)
		}
		<-p.Done()
		if code, _ := p.Wait(); code != -1 {
			t.Errorf("Wait after Kill: exit %d, want -1", code)
		}
		for deadline := time.Now().Add(wait); len(running()) > 0; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("left after Kill: %q", running())
			}
		}
		_ = p.Kill() // again: nothing
	}
}

// HoldGrace is the grace the hold case gives its relays.
const HoldGrace = 3 * time.Second

// knock is a program that connects to the unix socket $1, says $2 and
// prints the relay's first line.
const knock = `import os, socket, sys
os.chdir(os.path.dirname(sys.argv[1]))  # an address holds 107 bytes
s = socket.socket(socket.AF_UNIX)
s.connect(os.path.basename(sys.argv[1]))
s.sendall((sys.argv[2] + "\n").encode())
s.settimeout(10)
print(s.makefile().readline().strip(), flush=True)
`

// testHold: a process started with Keep outlives Berth's letting go of
// it without a signal (Dropper: as a Berth that died would) with its
// stdin and stdout open, its relay refuses a stranger's token, a Berth
// that comes back (where the enclosure can take a process back) gets it
// with the token, and when none does, nothing of the tree is left after
// the grace. Kill of a kept process ends it at once.
//
// Issue 29 item 2.
func testHold(t *testing.T, h Harness) {
	f := attachNew(t, h, Options{})
	n := 600000 + rand.IntN(300000)
	mark := fmt.Sprintf("sleep %d", n)
	dir := filepath.Join(t.TempDir(), "relays") // Berth's, for an enclosure that shares its files
	token := fmt.Sprintf("%032x", rand.Uint64())
	keep := &enclosure.Keep{Kind: "test", Token: token, Grace: HoldGrace, Dir: dir}
	running := func() bool {
		for _, ps := range h.Processes(t, f.id) {
			if strings.Contains(ps, mark) {
				return true
			}
		}
		return false
	}
	p := f.start(t, enclosure.Cmd{Path: "sh", Dir: f.inside, Keep: keep, Stderr: io.Discard,
		Args: []string{"-c", mark + ` & echo ready; while read l; do echo "got $l"; done; echo eof`}})
	kept, ok := p.(enclosure.Kept)
	if !ok {
		t.Fatalf("a process started with Keep is no enclosure.Kept: %T", p)
	}
	socket, tag, why := kept.Held()
	if socket == "" || tag == "" {
		t.Fatalf("the relay does not hold the process: %s", why)
	}
	out := bufio.NewReader(p.Stdout())
	if l, err := out.ReadString('\n'); l != "ready\n" {
		t.Fatalf("read %q, %v", l, err)
	}
	io.WriteString(p.Stdin(), "one\n")
	if l, err := out.ReadString('\n'); l != "got one\n" {
		t.Fatalf("read %q, %v", l, err)
	}
	p.(enclosure.Dropper).Drop()
	dropped := time.Now()
	time.Sleep(HoldGrace / 4)
	if !running() {
		t.Fatalf("the kept process ended with its Berth's connection, within the grace")
	}

	// A stranger, in the enclosure, without the token.
	var knocked strings.Builder
	stranger := f.start(t, enclosure.Cmd{Path: "python3", Args: []string{"-c", knock, socket, strings.Repeat("0", len(token))}, Dir: f.inside, Stderr: &knocked})
	said, _ := io.ReadAll(stranger.Stdout())
	if !strings.Contains(string(said), "wrong token") {
		t.Errorf("a stranger with a wrong token was told %q (stderr %q), want a refusal", said, knocked.String())
	}

	// A Berth that comes back: every driver takes the process back with
	// the token, and is refused with another.
	r, ok := f.enc.(enclosure.Reattacher)
	if !ok {
		t.Fatalf("the %s enclosure %T cannot take a kept process back: it is no enclosure.Reattacher", h.Name(), f.enc)
	}
	hold := enclosure.Hold{Socket: socket, Token: token, Dir: f.inside}
	wrong := hold
	wrong.Token = strings.Repeat("1", len(token))
	if back, err := r.Reattach(ctx(t), wrong); !errors.Is(err, enclosure.ErrPermission) || !strings.Contains(err.Error(), "wrong token") {
		if err == nil {
			_ = back.Kill()
		}
		t.Errorf("coming back with a wrong token: %v, want a refusal (a permission error) that says the token is wrong", err)
	}
	if !running() {
		t.Fatal("a Berth refused for its token ended the kept process")
	}
	took := time.Now()
	back, err := r.Reattach(ctx(t), hold)
	if err != nil {
		t.Fatalf("coming back to %s: %v", socket, err)
	}
	t.Logf("the %s driver took the kept process back in %v", h.Name(), time.Since(took).Round(time.Millisecond))
	backOut := bufio.NewReader(back.Stdout())
	io.WriteString(back.Stdin(), "two\n")
	if l, err := backOut.ReadString('\n'); l != "got two\n" {
		t.Fatalf("after coming back, read %q, %v", l, err)
	}
	if s, tg, why := back.(enclosure.Kept).Held(); s != socket || tg != tag {
		t.Errorf("the process taken back is held at %q (tag %q, %s), want %s (tag %s) again", s, tg, why, socket, tag)
	}
	back.(enclosure.Dropper).Drop() // and gone again: a new grace
	dropped = time.Now()
	for deadline := dropped.Add(HoldGrace + wait); running(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the kept process outlived the grace by %v", wait)
		}
	}
	if took := time.Since(dropped); took < HoldGrace*3/4 {
		t.Errorf("the kept process ended %v after the drop, before the grace of %v", took, HoldGrace)
	}
	// A Berth that comes back too late is told so, once; then the
	// relay is simply gone.
	if _, err := r.Reattach(ctx(t), hold); !errors.Is(err, enclosure.ErrHoldExpired) {
		t.Errorf("coming back after the grace: %v, want ErrHoldExpired", err)
	}
	if _, err := r.Reattach(ctx(t), hold); !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("coming back again after the grace: %v, want a relay that is not there", err)
	}

	// An orderly stop of a process taken back ends it at once.
	mark2 := fmt.Sprintf("sleep %d", n+2)
	p = f.start(t, enclosure.Cmd{Path: "sh", Dir: f.inside, Keep: keep, Stderr: io.Discard,
		Args: []string{"-c", mark2 + ` & echo ready; wait`}})
	if l, err := bufio.NewReader(p.Stdout()).ReadString('\n'); l != "ready\n" {
		t.Fatalf("read %q, %v", l, err)
	}
	socket2, _, _ := p.(enclosure.Kept).Held()
	p.(enclosure.Dropper).Drop()
	// The relay starts its hold once it read the end of its control: a
	// moment after the drop, in which it still says a Berth is attached.
	for deadline := time.Now().Add(wait); ; time.Sleep(20 * time.Millisecond) {
		back, err = r.Reattach(ctx(t), enclosure.Hold{Socket: socket2, Token: token, Dir: f.inside})
		if err == nil || !strings.Contains(err.Error(), "another Berth is attached") || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("coming back to %s: %v", socket2, err)
	}
	killed := time.Now()
	_ = back.Kill()
	select {
	case <-back.Done():
	case <-time.After(wait):
		t.Fatal("Kill of a process taken back: it never ended")
	}
	if took := time.Since(killed); took > HoldGrace {
		t.Errorf("Kill of a process taken back took %v, as long as the hold's grace", took)
	}

	// A kept start that fails says why, with its class.
	if p, err := f.enc.Start(ctx(t), enclosure.Cmd{Path: "sh", Dir: path.Join(f.inside, "berth-no-such-dir"), Keep: keep, Args: []string{"-c", "true"}}); err == nil {
		if code, _ := p.Wait(); code == 0 {
			t.Error("a kept start in a missing directory ran")
		}
	} else {
		t.Logf("a kept start in a missing directory: %v", err)
	}

	// An orderly stop never holds.
	mark = fmt.Sprintf("sleep %d", n+1)
	p = f.start(t, enclosure.Cmd{Path: "sh", Dir: f.inside, Keep: keep, Stderr: io.Discard,
		Args: []string{"-c", mark + ` & echo ready; wait`}})
	if l, err := bufio.NewReader(p.Stdout()).ReadString('\n'); l != "ready\n" {
		t.Fatalf("read %q, %v", l, err)
	}
	start := time.Now()
	_ = p.Kill()
	<-p.Done()
	for deadline := start.Add(wait); running(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a kept process outlived its Kill")
		}
	}
	if took := time.Since(start); took > HoldGrace {
		t.Errorf("Kill of a kept process took %v, as long as the hold's grace", took)
	}
}

func testLookPath(t *testing.T, h Harness) {
	f := attachNew(t, h, Options{})
	for range 2 { // the second answer may be kept
		p, err := f.enc.LookPath(ctx(t), "sh")
		if err != nil || !path.IsAbs(p) {
			t.Fatalf("LookPath(sh) = %q, %v", p, err)
		}
	}
	if p, err := f.enc.LookPath(ctx(t), "berth-no-such-program"); !errors.Is(err, enclosure.ErrNotFound) {
		t.Errorf("LookPath(a missing program) = %q, %v; want ErrNotFound", p, err)
	}
}

// echoServer listens on a port of the enclosure's loopback, prints it,
// and answers one connection with what it reads, upper-cased.
const echoServer = `import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
print(s.getsockname()[1], flush=True)
c, _ = s.accept()
c.sendall(c.recv(100).upper())
c.close()
`

func testDial(t *testing.T, h Harness) {
	f := attachNew(t, h, Options{})
	p := f.start(t, enclosure.Cmd{Path: "python3", Args: []string{"-c", echoServer}, Dir: f.inside, Stderr: io.Discard})
	var port int
	if _, err := fmt.Fscan(bufio.NewReader(p.Stdout()), &port); err != nil {
		t.Fatalf("the server's port: %v", err)
	}
	conn, err := f.enc.Dial(ctx(t), port)
	if err != nil {
		t.Fatalf("Dial(%d): %v", port, err)
	}
	io.WriteString(conn, "hello")
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	b := make([]byte, 5)
	if _, err := io.ReadFull(conn, b); err != nil || string(b) != "HELLO" {
		t.Errorf("through the connection: %q, %v", b, err)
	}
	conn.Close()
	<-p.Done()
	if conn, err := f.enc.Dial(ctx(t), port); err == nil {
		// A forwarded connection may say so only at its first read.
		_ = conn.SetReadDeadline(time.Now().Add(wait))
		if _, rerr := conn.Read(make([]byte, 1)); rerr == nil {
			t.Errorf("Dial(%d) with nothing listening: a connection that reads", port)
		}
		conn.Close()
	}
	if _, err := f.enc.Dial(ctx(t), 0); !errors.Is(err, enclosure.ErrInvalidConfig) {
		t.Errorf("Dial(0) = %v, want ErrInvalidConfig", err)
	}
}

// greeter listens on a port of the enclosure's loopback, prints it, and
// greets each of the connections it accepts, at once, with greeting
// bytes of "g" and a newline, then answers its line upper-cased.
const greeter = `import socket, sys
n = int(sys.argv[1])
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
print(s.getsockname()[1], flush=True)
for _ in range(int(sys.argv[2])):
    c, _ = s.accept()
    c.sendall(b"g" * n + b"\n")
    f = c.makefile("rb")
    c.sendall(f.readline().upper())
    c.close()
`

// testDialSpeaksFirst dials, again and again, a server that writes before
// it reads (a debugpy adapter's first events, an SSH banner): each Dial
// returns, the greeting arrives whole, and the connection then works
// both ways. Docker's exec stream carries stdout and stderr in one
// stream, so a greeting that came before the relay's ready line on
// stderr held the line back, and the Dial with it, until the call gave
// up: the Kubernetes stand-in's debugpy attach over SPDY failed so (the
// stand-in forwards through the Docker driver's Dial).
func testDialSpeaksFirst(t *testing.T, h Harness) {
	const dials, size = 8, 256 << 10
	f := attachNew(t, h, Options{})
	p := f.start(t, enclosure.Cmd{Path: "python3", Args: []string{"-c", greeter, strconv.Itoa(size), strconv.Itoa(dials)}, Dir: f.inside, Stderr: io.Discard})
	var port int
	if _, err := fmt.Fscan(bufio.NewReader(p.Stdout()), &port); err != nil {
		t.Fatalf("the server's port: %v", err)
	}
	for i := range dials {
		dctx, cancel := context.WithTimeout(ctx(t), 20*time.Second)
		start := time.Now()
		conn, err := f.enc.Dial(dctx, port)
		cancel()
		if err != nil {
			t.Fatalf("dial %d to a server that speaks first: %v (after %s)", i, err, time.Since(start).Round(time.Millisecond))
		}
		_ = conn.SetDeadline(time.Now().Add(wait))
		r := bufio.NewReaderSize(conn, 4096)
		line, err := r.ReadString('\n')
		if err != nil || len(line) != size+1 {
			t.Fatalf("dial %d: the greeting: %d bytes, %v; want %d", i, len(line), err, size+1)
		}
		io.WriteString(conn, "ping\n")
		if back, err := r.ReadString('\n'); err != nil || back != "PING\n" {
			t.Fatalf("dial %d: the answer: %q, %v", i, back, err)
		}
		conn.Close()
	}
	<-p.Done()
}

func testStopped(t *testing.T, h Harness) {
	f := attachNew(t, h, Options{})
	p := f.start(t, enclosure.Cmd{Path: "sh", Args: []string{"-c", "echo up; sleep 1000"}, Dir: f.inside, Stderr: io.Discard})
	if l, err := bufio.NewReader(p.Stdout()).ReadString('\n'); l != "up\n" {
		t.Fatalf("read %q, %v", l, err)
	}
	if declared(t, h, "stop an enclosure", h.Stop(t, f.id)) {
		return
	}
	select {
	case <-p.Done():
	case <-time.After(wait):
		t.Fatal("a process outlived its stopped enclosure")
	}
	if _, err := p.Wait(); !enclosure.Down(err) {
		t.Errorf("Wait of a process its enclosure's stop ended = %v, want an error saying the enclosure stopped", err)
	}
	f.gone(t, "stopped", "LookPath", "Start", "Attach")
}

// gone checks that each call, on f's enclosure that is stopped or
// removed (state), is an error wrapping enclosure.ErrGone.
func (f *fixture) gone(t *testing.T, state string, calls ...string) {
	t.Helper()
	do := map[string]func() error{
		"Check":    func() error { return enclosure.Check(ctx(t), f.enc) },
		"LookPath": func() error { _, err := f.enc.LookPath(ctx(t), "sh"); return err },
		"Start":    func() error { _, err := f.enc.Start(ctx(t), enclosure.Cmd{Path: "/bin/true"}); return err },
		"Attach":   func() error { _, err := f.d.Attach(ctx(t), f.id); return err },
	}
	for _, call := range append([]string{"Check"}, calls...) {
		if err := do[call](); !errors.Is(err, enclosure.ErrGone) {
			t.Errorf("%s of a %s enclosure = %v, want ErrGone", call, state, err)
		}
	}
}

func testRemoved(t *testing.T, h Harness) {
	f := attachNew(t, h, Options{})
	if declared(t, h, "remove an enclosure", h.Remove(t, f.id)) {
		return
	}
	f.gone(t, "removed", "Start", "Attach")
}

func testSilent(t *testing.T, h Harness) {
	network, address, err := h.Engine()
	if declared(t, h, "silence its engine", err) {
		return
	}
	proxy := NewProxy(t, network, address)
	id, err := h.Make(t, Options{Workdir: h.Workdir(t)})
	if err != nil {
		t.Fatal(err)
	}
	d := h.Driver(t, proxy.Addr())
	enc, err := d.Attach(ctx(t), id)
	if err != nil {
		t.Fatalf("Attach through the proxy: %v", err)
	}
	if _, err := enc.LookPath(ctx(t), "sh"); err != nil {
		t.Fatal(err)
	}
	proxy.Silence()
	start := time.Now()
	for _, c := range []struct {
		what string
		err  func() error
	}{
		{"Check", func() error { return enclosure.Check(ctx(t), enc) }},
		{"Start", func() error { _, err := enc.Start(ctx(t), enclosure.Cmd{Path: "/bin/true"}); return err }},
		{"Find", func() error { _, err := d.Find(ctx(t), "berth-silent"); return err }},
	} {
		if err := c.err(); !errors.Is(err, enclosure.ErrUnavailable) {
			t.Errorf("%s with a silent engine = %v, want ErrUnavailable", c.what, err)
		}
	}
	if took := time.Since(start); took > 2*wait {
		t.Errorf("a silent engine took %v to be named", took)
	}
}

func testRelay(t *testing.T, h Harness) {
	id, err := h.Make(t, Options{Relay: RelayStreamed})
	if declared(t, h, "make an enclosure without the relay", err) {
		return
	}
	d := h.Driver(t, "")
	enc, err := d.Attach(ctx(t), id)
	if err != nil {
		t.Fatalf("Attach to an image without the relay: %v", err)
	}
	p, err := enc.Start(ctx(t), enclosure.Cmd{Path: "/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(); code != 0 || err != nil {
		t.Fatalf("under a streamed relay: exit %d, %v", code, err)
	}
	if again, err := d.Attach(ctx(t), id); err != nil || again.ID() != enc.ID() {
		t.Fatalf("a second Attach (the relay installed by the first): %v", err)
	}
	id, err = h.Make(t, Options{Relay: RelayImpossible})
	if declared(t, h, "make an enclosure with nowhere for the relay", err) {
		return
	}
	_, err = d.Attach(ctx(t), id)
	if !errors.Is(err, enclosure.ErrNotSupported) || !strings.Contains(err.Error(), "Bake it into the image") {
		t.Errorf("Attach with nowhere for the relay = %v, want ErrNotSupported naming what it tried", err)
	}
}

// Attach attaches d to id within a minute, failing the test otherwise,
// and returns the enclosure as the driver's own type E (for a driver's
// tests of what is its own).
func Attach[E enclosure.Enclosure](t testing.TB, d enclosure.Driver, id string) E {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	enc, err := d.Attach(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return enc.(E)
}

// Base is what most harnesses share: the driver's name, where Make
// mounts a workdir, and fresh workdirs anywhere.
type Base struct {
	Driver string // Name
	At     string // Inside
}

func (b Base) Name() string              { return b.Driver }
func (b Base) Inside() string            { return b.At }
func (Base) Workdir(t *testing.T) string { return Workdir(t) }

// The images the container drivers' tests run, as scripts/images builds
// them.
const (
	FullImage = "berth/full:dev"
	BaseImage = "berth/base:bookworm" // no relay, no python
)
