package e2e

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/orchestrator/rpc"
)

// A kernel's stdio socket in the workdir, seen by every process in the
// container (issue 24 item 3). A stranger in the container watches the
// workdir and connects to each socket the moment it appears, before the
// relay does, while it reads every process's environment and command
// line as any process in the container can:
//   - the relay's token is in no process's environment or command line;
//   - a racing stranger, which sends the token whenever it finds one, is
//     closed without receiving a byte of the program's stdin (the kernel
//     driver's source, the cells);
//   - twenty silent strangers do not delay the kernel's start past its
//     deadline (the figure is logged beside a start without them).
func TestContainersStdioSocketKeepsStrangersOut(t *testing.T) {
	s := inContainer(kernelImage).fresh(t)
	strangersOnTheSocket(t, s, startFamilies(t, family{config: kernelsSection}))
}

// The same in a containerd container.
func TestContainersContainerdStdioSocketKeepsStrangersOut(t *testing.T) {
	s := inContainerd(t, kernelImage).fresh(t)
	strangersOnTheSocket(t, s, startFamilies(t, containerdSection, family{config: kernelsSection}))
}

// strangerPy is the stranger: "stranger.py MODE WATCH OUT". It connects
// to every .berth-*.sock that appears in WATCH, once (race) or 20 times
// (silent), as soon as it sees it; in race mode it sends, on its first
// connection, any token it finds in a process's environment or command
// line. It reads what each connection receives until it is closed, and
// logs to OUT/log: "connected N NAME", "received N NAME" and "leak ..."
// for every token-like value it finds in a process's environment or
// command line ($BERTH_RELAY_TOKEN anywhere; 32 hex digits in a relay's),
// "relay PID ARGS" (up to PROG) for each relay it looked at, and the bytes it received to
// OUT/received. It logs "watching" once it watches.
const strangerPy = `import os, re, select, socket, sys, threading, time
mode, watch, out = sys.argv[1], sys.argv[2], sys.argv[3]
lock = threading.Lock()
log = open(os.path.join(out, "log"), "a", buffering=1)
def note(s):
    with lock:
        log.write(s + "\n")
hexword = re.compile(rb"(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])")
relays, leaks = set(), set()
found = []
def scan():
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmd = open("/proc/%s/cmdline" % pid, "rb").read()
            env = open("/proc/%s/environ" % pid, "rb").read()
        except OSError:
            continue
        relay = b"berth-relay" in cmd.split(b"\0")[0]
        if relay and pid not in relays:
            relays.add(pid)
            note("relay %s %s" % (pid, cmd.split(b"\0--\0")[0].replace(b"\0", b" ").decode(errors="replace")))
        for what, b in (("cmdline", cmd), ("environ", env)):
            vals = re.findall(rb"BERTH_RELAY_TOKEN=([^\0]*)", b)
            if relay:
                vals += hexword.findall(b)
            for v in vals:
                found.append(v)
                if (pid, what, v) not in leaks:
                    leaks.add((pid, what, v))
                    note("leak pid %s %s: %s" % (pid, what, v.decode(errors="replace")))
def scanner():
    while True:
        scan()
        time.sleep(0.002)
def stranger(p):
    name = os.path.basename(p)
    conns = []
    for _ in range(20 if mode == "silent" else 1):
        c = socket.socket(socket.AF_UNIX)
        try:
            c.connect(p)
        except OSError as e:
            note("connect failed %s: %s" % (name, e))
            continue
        conns.append(c)
    note("connected %d %s" % (len(conns), name))
    if mode == "race" and conns:
        deadline = time.time() + 3
        while not found and time.time() < deadline:
            scan()
        if found:
            try:
                conns[0].sendall(found[-1] + b"\n")
                note("sent a token %s" % name)
            except OSError:
                pass
    got, open_ = b"", list(conns)
    deadline = time.time() + 60
    while open_ and time.time() < deadline:
        r, _, _ = select.select(open_, [], [], 0.5)
        for c in r:
            try:
                b = c.recv(65536)
            except OSError:
                b = b""
            if b:
                got += b
            else:
                open_.remove(c)
                c.close()
    with lock:
        open(os.path.join(out, "received"), "ab").write(got)
    note("received %d %s" % (len(got), name))
threading.Thread(target=scanner, daemon=True).start()
seen = set()
note("watching")
while True:
    for n in os.listdir(watch):
        if n.startswith(".berth-") and n.endswith(".sock") and n not in seen:
            seen.add(n)
            threading.Thread(target=stranger, args=(os.path.join(watch, n),)).start()
    time.sleep(0.001)
`

var (
	connectedLine = regexp.MustCompile(`(?m)^connected `)
	receivedLine  = regexp.MustCompile(`(?m)^received `)
)

// strangersOnTheSocket runs the three checks in s's container, a python
// kernel's start in each: without a stranger (the figure to compare),
// with a racing one, with twenty silent ones.
func strangersOnTheSocket(t *testing.T, s *site, c *rpc.Client) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(s.Dir, "stranger.py"), []byte(strangerPy), 0o644); err != nil {
		t.Fatal(err)
	}
	start := func(code string) (string, time.Duration, string) {
		t.Helper()
		run := s.start(t, c, nil)
		began := time.Now()
		res := evalCell(t, c, run, "python", code)
		took := time.Since(began)
		if res.IsError {
			// The strangers' logs still say why.
			t.Errorf("the kernel's first cell failed after %v: %s", took.Round(time.Millisecond), text(res))
		}
		return run, took, text(res)
	}
	// stranger starts one in mode, in a folder of its own for its output.
	stranger := func(mode string) (out string, stop func()) {
		t.Helper()
		out = filepath.Join(s.Dir, mode)
		if err := os.Mkdir(out, 0o777); err != nil {
			t.Fatal(err)
		}
		stop = s.service(t, "/usr/bin/python3", path.Join(s.Inside, "stranger.py"), mode, s.Inside, path.Join(s.Inside, mode))
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if log, _ := os.ReadFile(filepath.Join(out, "log")); bytes.Contains(log, []byte("watching\n")) {
				return out, stop
			}
			if time.Now().After(deadline) {
				t.Fatal("the stranger did not start watching the workdir")
			}
		}
	}
	// received waits until the stranger has read each of its
	// connections to its end, and returns its log and what it received.
	received := func(out string) (string, []byte) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			log, _ := os.ReadFile(filepath.Join(out, "log"))
			l := string(log)
			if n := len(connectedLine.FindAllString(l, -1)); n > 0 && n == len(receivedLine.FindAllString(l, -1)) {
				got, _ := os.ReadFile(filepath.Join(out, "received"))
				return l, got
			}
			if time.Now().After(deadline) {
				t.Fatalf("the stranger did not connect, or did not see its connections end:\n%s", l)
			}
		}
	}
	stopRun := func(run string) {
		t.Helper()
		if err := c.StopRun(testCtx(t), run); err != nil {
			t.Fatal(err)
		}
		s.waitNoProcesses(t, "run/stop")
	}

	run, alone, _ := start("1+1")
	t.Logf("a python kernel's start and first cell, no stranger: %v", alone.Round(time.Millisecond))
	stopRun(run)

	// A racing stranger; the cell's text is what it must never see.
	secret := fmt.Sprintf("cell-secret-%d", rand.Uint64())
	out, stop := stranger("race")
	run, took, got := start(fmt.Sprintf("print(%q)", secret))
	if !strings.Contains(got, secret) {
		t.Errorf("the cell printed %q", got)
	}
	// The stranger reads the environments and command lines while the
	// kernel runs too.
	time.Sleep(500 * time.Millisecond)
	log, bytesGot := received(out)
	stop()
	t.Logf("with a racing stranger: %v; the stranger's log:\n%s", took.Round(time.Millisecond), log)
	if !strings.Contains(log, "relay ") {
		t.Errorf("the stranger never saw a relay's process: its look at the environments proves nothing")
	}
	if strings.Contains(log, "leak ") {
		t.Errorf("the relay's token is readable in the container (see the log above)")
	}
	if len(bytesGot) > 0 {
		t.Errorf("the racing stranger received %d bytes of the program's stdin (the cell's text in them: %v):\n%.300q", len(bytesGot), bytes.Contains(bytesGot, []byte(secret)), bytesGot)
	}
	relays := regexp.MustCompile(`(?m)^relay \d+ .*--connect \S+ .*--token-stdin\s*$`).FindAllString(log, -1)
	if len(relays) == 0 {
		t.Errorf("no relay seen with --connect and --token-stdin")
	}
	stopRun(run)

	// Twenty silent strangers.
	out, stop = stranger("silent")
	run, took, _ = start("1+1")
	log, bytesGot = received(out)
	stop()
	t.Logf("with 20 silent strangers: %v (without: %v); the stranger's log:\n%s", took.Round(time.Millisecond), alone.Round(time.Millisecond), log)
	if !strings.Contains(log, "connected 20 ") {
		t.Errorf("the stranger did not hold 20 connections to a socket")
	}
	if len(bytesGot) > 0 {
		t.Errorf("the silent strangers received %d bytes of the program's stdin:\n%.300q", len(bytesGot), bytesGot)
	}
	stopRun(run)
}
