package containerd

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/containerd/containerdtest"
	"github.com/berth-dev/berth/enclosure/enclosuretest"
	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/enclosure/mounts"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
	"github.com/berth-dev/berth/enclosure/relayexec"
)

// A containerd that does not answer is skipped by auto with a log line,
// and is an error that says so when named.
//
// Issue 14 item 2.
func TestAutoSkipsAContainerdThatDoesNotAnswer(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "no-containerd.sock")
	d := newDriver(t, Options{Config: Config{Address: sock}})
	var log strings.Builder
	l := &enclosure.Lookup{Host: host.New(), Drivers: map[string]enclosure.Driver{Name: d}, Auto: []string{Name},
		Log: slog.New(slog.NewTextHandler(&log, nil))}
	enc, err := l.Find(context.Background(), enclosure.Spec{Driver: "auto"}, "conv")
	if err != nil || enc.Driver() != "host" || !strings.Contains(log.String(), "did not answer") || !strings.Contains(log.String(), "driver=containerd") {
		t.Fatalf("auto without containerd: %v, %v; log %q", enc, err, log.String())
	}
	// The error names the cause (containerd's own dialer would wait for
	// the socket to appear until the call's deadline, and say only that).
	_, err = d.Attach(context.Background(), "anything")
	if !errors.Is(err, enclosure.ErrUnavailable) || !strings.Contains(err.Error(), sock) || !strings.Contains(err.Error(), "no such file or directory") {
		t.Fatalf("Attach without containerd: %v", err)
	}
}

// Berth never creates or starts a task: a container without one, or whose
// task has stopped, is an error that says so.
//
// Issue 14 item 2.
func TestContainerWithoutARunningTaskIsAnError(t *testing.T) {
	d := newDriver(t, Options{})
	created := containerdtest.Create(t, testLabel, "conv-"+containerdtest.NewID(), enclosuretest.BaseImage)
	_, err := d.Attach(context.Background(), created)
	if !errors.Is(err, enclosure.ErrNotFound) || !strings.Contains(err.Error(), "has no task") || !strings.Contains(err.Error(), "never creates or starts a task") {
		t.Fatalf("a container without a task: %v", err)
	}
	stopped := run(t, "", enclosuretest.BaseImage, "")
	killTask(t, stopped)
	_, err = d.Attach(context.Background(), stopped)
	if !errors.Is(err, enclosure.ErrNotFound) || !strings.Contains(err.Error(), "task that is stopped (exit code 137)") {
		t.Fatalf("a container whose task stopped: %v", err)
	}
}

func lineOf(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// Dropping Berth's ends of the FIFOs (as Berth dying does) ends the run:
// the shim holds no stdin writer of its own after CloseIO, so the relay
// reads EOF and ends its group.
//
// Issue 14 item 3.
func TestDroppedStreamsLeaveNothing(t *testing.T) {
	id := run(t, "", enclosuretest.FullImage, "")
	d := newDriver(t, Options{})
	c := attach(t, d, id)
	p, err := c.Start(context.Background(), enclosure.Cmd{Path: "sh", Args: []string{"-c", "sleep 1000 & echo up; wait"}})
	if err != nil {
		t.Fatal(err)
	}
	h := relayexec.StreamOf(p).(*proc)
	if line, err := bufio.NewReader(p.Stdout()).ReadString('\n'); err != nil || line != "up\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	// Close the stdin FIFO itself, not the program's stdin frame, and
	// stop reading.
	if err := h.stdinW.Close(); err != nil {
		t.Fatal(err)
	}
	h.stdout.Close()
	h.stderr.Close()
	<-p.Done()
	onlySleep(t, id)
	noFIFOs(t, d, id)
}

// MapPath and HostPath come from the OCI spec's mounts, with the mounts
// package's rules and errors.
//
// Issue 14 item 4.
func TestMapPathAndHostPathFromTheSpecsMounts(t *testing.T) {
	wd := enclosuretest.Workdir(t)
	if err := os.MkdirAll(filepath.Join(wd, "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	id := run(t, "", enclosuretest.FullImage, wd)
	d := newDriver(t, Options{})
	c := attach(t, d, id)
	in, err := c.MapPath(filepath.Join(wd, "pkg", "a.go"))
	if err != nil || in != "/workspace/pkg/a.go" {
		t.Fatalf("MapPath: %q, %v", in, err)
	}
	back, err := c.HostPath("/workspace/pkg/a.go")
	if err != nil || back != filepath.Join(wd, "pkg", "a.go") {
		t.Fatalf("HostPath: %q, %v", back, err)
	}
	other := enclosuretest.Workdir(t)
	_, err = c.MapPath(other)
	if !errors.Is(err, enclosure.ErrNotFound) || !strings.Contains(err.Error(), wd+" -> /workspace") || !strings.Contains(err.Error(), "bind-mount the workdir") {
		t.Fatalf("MapPath of an unmounted path: %v", err)
	}
	if _, err := c.HostPath("/proc/self"); !errors.Is(err, enclosure.ErrNotFound) {
		t.Fatalf("HostPath of /proc: %v", err)
	}
	if _, err := c.HostPath("/etc/passwd"); !errors.Is(err, enclosure.ErrNotFound) {
		t.Fatalf("HostPath of the image's own file: %v", err)
	}
	// The process sees the mapped path.
	p, err := c.Start(context.Background(), enclosure.Cmd{Path: "ls", Dir: in[:len(in)-len("/a.go")]})
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, p.Stdout())
	io.Copy(io.Discard, p.Stderr())
	if code, err := p.Wait(); code != 0 || err != nil {
		t.Fatalf("ls in the mapped dir: %d, %v", code, err)
	}
	// enclosure.path_map: Berth sees the host's wd at /berth/work.
	d2 := newDriver(t, Options{Shared: relayexec.Shared{PathMap: mounts.Table{{Source: wd, Destination: "/berth/work"}}}})
	c2 := attach(t, d2, id)
	if in, err := c2.MapPath("/berth/work/pkg"); err != nil || in != "/workspace/pkg" {
		t.Fatalf("MapPath through path_map: %q, %v", in, err)
	}
	if back, err := c2.HostPath("/workspace/pkg"); err != nil || back != "/berth/work/pkg" {
		t.Fatalf("HostPath through path_map: %q, %v", back, err)
	}
}

// Restarting containerd: while it is down, Attach and Start fail with an
// error that says containerd did not answer; a process already running
// lives on (its FIFOs go to the shim, not through containerd) and its
// exit is read once containerd is back; the next calls work.
//
// Issue 14 item 5.
func TestContainerdRestartKeepsRunningProcesses(t *testing.T) {
	id := run(t, "", enclosuretest.FullImage, "")
	d := newDriver(t, Options{})
	c := attach(t, d, id)
	p, err := c.Start(context.Background(), enclosure.Cmd{Path: "sh", Args: []string{"-c", "read x; echo got $x; exit 7"}})
	if err != nil {
		t.Fatal(err)
	}
	containerdtest.Restart(t, func() {
		_, err := c.Start(context.Background(), enclosure.Cmd{Path: "/bin/true"})
		if !errors.Is(err, enclosure.ErrUnavailable) || !strings.Contains(err.Error(), "did not answer") || !strings.Contains(err.Error(), containerdtest.Address()) {
			t.Errorf("Start while containerd is down: %v", err)
		}
		_, err = d.Attach(context.Background(), id)
		if !errors.Is(err, enclosure.ErrUnavailable) {
			t.Errorf("Attach while containerd is down: %v", err)
		}
		if _, err := io.WriteString(p.Stdin(), "x\n"); err != nil {
			t.Errorf("stdin while containerd is down: %v", err)
		}
	})
	go io.Copy(io.Discard, p.Stderr())
	out, _ := io.ReadAll(p.Stdout())
	if code, err := p.Wait(); code != 7 || err != nil || string(out) != "got x\n" {
		t.Fatalf("the process that ran across the restart: %q, %d, %v", out, code, err)
	}
	p2, err := c.Start(context.Background(), enclosure.Cmd{Path: "true"})
	if err != nil {
		t.Fatalf("Start after the restart: %v", err)
	}
	io.Copy(io.Discard, p2.Stdout())
	io.Copy(io.Discard, p2.Stderr())
	if code, err := p2.Wait(); code != 0 || err != nil {
		t.Fatalf("after the restart: %d, %v", code, err)
	}
	onlySleep(t, id)
	noFIFOs(t, d, id)
}

// The container's task killed under a running process: the process ends,
// and its Wait says the task stopped, not only an exit code; its exec and
// FIFOs are cleaned up all the same.
//
// Issue 14 item 3.
func TestTaskKilledUnderAProcessEndsIt(t *testing.T) {
	id := run(t, "", enclosuretest.FullImage, "")
	d := newDriver(t, Options{})
	c := attach(t, d, id)
	p, err := c.Start(context.Background(), enclosure.Cmd{Path: "sh", Args: []string{"-c", "echo up; sleep 1000"}})
	if err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(p.Stdout()).ReadString('\n'); err != nil || line != "up\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	if _, err := containerdtest.Ctr("tasks", "kill", "-s", "KILL", id); err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	code, err := p.Wait()
	if !errors.Is(err, enclosure.ErrNotFound) || !strings.Contains(err.Error(), "task that is stopped") {
		t.Fatalf("Wait after the task was killed: %d, %v", code, err)
	}
	if left := fifosLeft(d); len(left) != 0 {
		t.Fatalf("FIFOs left: %v", left)
	}
}

// BenchmarkStart: a process started under the relay and
// waited for, against a bare exec of /bin/true.
//
// Issue 14 item 3.
func BenchmarkStart(b *testing.B) {
	id := run(b, "", enclosuretest.FullImage, "")
	c := attach(b, newDriver(b, Options{}), id)
	relaytest.BenchStart(b, c, func(ctx context.Context, argv []string, stdin io.Reader) (relay.Result, error) {
		return c.run(ctx, nil, argv, stdin)
	})
}

// BenchmarkDial: a new connection through relay dial and one
// round trip, and a round trip of 512 bytes on an open connection, to an
// echo server on the container's loopback.
//
// Issue 14 item 3.
func BenchmarkDial(b *testing.B) {
	id := run(b, "", enclosuretest.FullImage, "")
	c := attach(b, newDriver(b, Options{}), id)
	const echo = `import socket, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 5680)); s.listen(); print("listening", flush=True)
def serve(conn):
    while (b := conn.recv(65536)): conn.sendall(b)
while True:
    conn, _ = s.accept(); threading.Thread(target=serve, args=(conn,), daemon=True).start()
`
	srv, err := c.Start(context.Background(), enclosure.Cmd{Path: "python3", Args: []string{"-c", echo}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { srv.Kill(); <-srv.Done() }()
	if line, err := bufio.NewReader(srv.Stdout()).ReadString('\n'); err != nil || line != "listening\n" {
		b.Fatalf("server: %q, %v", line, err)
	}
	roundTrip := func(b *testing.B, conn io.ReadWriter, msg []byte) {
		if _, err := conn.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(conn, make([]byte, len(msg))); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("connect", func(b *testing.B) {
		for b.Loop() {
			conn, err := c.Dial(context.Background(), 5680)
			if err != nil {
				b.Fatal(err)
			}
			roundTrip(b, conn, []byte("ping\n"))
			conn.Close()
		}
	})
	b.Run("roundtrip", func(b *testing.B) {
		conn, err := c.Dial(context.Background(), 5680)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		msg := []byte(strings.Repeat("m", 512))
		for b.Loop() {
			roundTrip(b, conn, msg)
		}
	})
}

// Docker's own containers are in containerd's moby namespace, without
// their labels: they are attached through the Docker driver only, so the
// containerd driver refuses that namespace and says which driver to use.
//
// Issue 14 item 2.
func TestDockersNamespaceIsRefused(t *testing.T) {
	d := newDriver(t, Options{Config: Config{Namespace: DockerNamespace}})
	for what, err := range map[string]error{
		"Attach": func() error { _, err := d.Attach(context.Background(), "any"); return err }(),
		"Find":   func() error { _, err := d.Find(context.Background(), "conv"); return err }(),
		"config": CheckNamespace(DockerNamespace),
	} {
		if !errors.Is(err, enclosure.ErrInvalidConfig) || !strings.Contains(err.Error(), "docker driver") {
			t.Errorf("%s in namespace moby: %v", what, err)
		}
	}
	if err := CheckNamespace("k8s.io"); err != nil {
		t.Errorf("k8s.io: %v", err)
	}
}

// Berth killed with SIGKILL while its process runs in the container: the
// kernel closes Berth's end of the stdin FIFO, and since the shim let go
// of its own writer (CloseIO right after Start), the relay reads EOF and
// ends its whole group. No process is left; what is left is the shim's
// record of the exited exec and its FIFOs, which the next Attach removes
// (TestAttachSweepsWhatAKilledBerthLeft).
//
// Issue 14 item 3.
func TestBerthKilledLeavesNothing(t *testing.T) {
	id := run(t, "", enclosuretest.FullImage, "")
	killedBerth(t, id, t.TempDir(), 0, func() {
		if n := len(containerdtest.Pids(t, id)); n < 4 { // sleep infinity, relay, sh, sleep
			t.Fatalf("the task runs %d processes with the helper's, want 4", n)
		}
	})
	onlySleep(t, id)
}

// A Berth killed with SIGKILL leaves the shim's records of its execs (one
// exited under the relay, three bare execs of sleep still running, which
// no EOF ends and which ignore SIGTERM) and their FIFO directories. The
// next Attach ends (SIGKILL after SIGTERM) and Deletes them and removes
// the FIFOs and the dead Berth's lock; a live Berth's process and FIFOs
// in the same directory, and directories that are not Berth's, are left
// alone. The stubborn three are waited for together: one reapWait, not
// three.
//
// Issue 14 item 3.
func TestAttachSweepsWhatAKilledBerthLeft(t *testing.T) {
	id := run(t, "", enclosuretest.FullImage, "")
	fifos := t.TempDir()
	foreign := []string{"123456789", "berth-notanowner@x@y"} // ctr's, and a look-alike
	for _, name := range foreign {
		if err := os.Mkdir(filepath.Join(fifos, name), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	live := newDriver(t, Options{FIFODir: fifos})
	lp, err := attach(t, live, id).Start(context.Background(), enclosure.Cmd{Path: "sh", Args: []string{"-c", "echo up; sleep 1000"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { lp.Kill(); <-lp.Done() }()
	if line, err := bufio.NewReader(lp.Stdout()).ReadString('\n'); err != nil || line != "up\n" {
		t.Fatalf("the live Berth's process: %q, %v", line, err)
	}
	liveExec := relayexec.StreamOf(lp).(*proc).proc.ID()

	const stubborn = 3
	killedBerth(t, id, fifos, stubborn, nil)
	var dead []*leftExec
	deadToken, deadLock := "", false
	for _, e := range fifosLeft(live) {
		token, x, ok := parseLeft(filepath.Base(e))
		if !ok || token == live.own.token {
			continue
		}
		deadToken = token
		if x == nil {
			deadLock = true
		} else {
			dead = append(dead, x)
		}
	}
	if len(dead) != 1+stubborn || !deadLock {
		t.Fatalf("the killed Berth left %v (lock: %v), want %d execs and its lock", dead, deadLock, 1+stubborn)
	}
	// The relay reads EOF and ends its group; the bare sleeps run on.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var st []string
		for _, x := range dead {
			st = append(st, execStatus(t, live, id, x.id))
		}
		all := strings.Join(st, " ")
		if strings.Count(all, "stopped") == 1 && strings.Count(all, "running") == stubborn {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed Berth's execs: %s; want one stopped, %d running", all, stubborn)
		}
	}

	start := time.Now()
	attach(t, newDriver(t, Options{FIFODir: fifos}), id)
	// One at a time, the stubborn execs would cost stubborn*reapWait.
	if took := time.Since(start); took >= 2*reapWait {
		t.Errorf("Attach took %v to sweep %d execs that ignore SIGTERM: they were waited for one at a time (each may take %v)", took, stubborn, reapWait)
	}
	for _, x := range dead {
		if st := execStatus(t, live, id, x.id); st != "not found" {
			t.Errorf("the killed Berth's exec %s after Attach: %s", x.id, st)
		}
		if _, err := os.Stat(filepath.Join(containerdtest.Bundle(id), x.id+".pid")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the shim's pid file of %s: %v", x.id, err)
		}
	}
	for _, e := range fifosLeft(live) {
		if token, _, _ := parseLeft(filepath.Base(e)); token == deadToken {
			t.Errorf("left of the killed Berth: %s", e)
		}
	}
	for _, name := range foreign {
		if _, err := os.Stat(filepath.Join(fifos, name)); err != nil {
			t.Errorf("a directory that is not Berth's: %v", err)
		}
		os.Remove(filepath.Join(fifos, name))
	}
	// The live Berth's process runs on, and ends as usual.
	if st := execStatus(t, live, id, liveExec); st != "running" {
		t.Fatalf("the live Berth's exec after the sweep: %s", st)
	}
	lp.Kill()
	<-lp.Done()
	if code, err := lp.Wait(); code != -1 || err != nil {
		t.Fatalf("the live Berth's process killed: %d, %v", code, err)
	}
	onlySleep(t, id)
	noFIFOs(t, live, id) // and no lock: neither Berth has an exec
}

// A Berth killed with SIGKILL while a kept process (Cmd.Keep) runs
// leaves it to its relay, which holds it for a Berth that comes back:
// the next Attach's sweep leaves its exec running (it ends every other
// one a dead Berth left), and the process is still there to be taken
// back with its token. Once the relay ended it, after the grace, the
// next Attach Deletes the exec and removes its FIFOs and the dead
// Berth's lock.
//
// Issue 29 item 3 (in containers).
func TestAttachLeavesAKilledBerthsKeptProcessToItsRelay(t *testing.T) {
	wd := enclosuretest.Workdir(t)
	id := run(t, "", enclosuretest.FullImage, wd)
	fifos := t.TempDir()
	const grace = 3 * time.Second
	killedBerth(t, id, fifos, 0, nil, helperKeepEnv+"="+grace.String())
	killed := time.Now()
	var kept *leftExec
	for _, e := range fifosLeft(&Driver{opts: Options{FIFODir: fifos}}) {
		if _, x, ok := parseLeft(filepath.Base(e)); ok && x != nil && x.kept {
			kept = x
		}
	}
	if kept == nil {
		t.Fatalf("the killed Berth left no kept exec: %v", fifosLeft(&Driver{opts: Options{FIFODir: fifos}}))
	}
	d := newDriver(t, Options{FIFODir: fifos})
	enc := attach(t, d, id)
	if st := execStatus(t, d, id, kept.id); st != "running" {
		t.Fatalf("the kept exec after the next Attach: %s, want it running, held by its relay", st)
	}
	out, err := enc.Run(context.Background(), []string{"sh", "-c", "ls " + relay.HoldDir}, nil)
	if err != nil || out.Code != 0 {
		t.Fatalf("ls %s: %+v, %v", relay.HoldDir, out, err)
	}
	socket := relay.HoldDir + "/" + strings.TrimSpace(out.Stdout)
	back, err := enc.Reattach(context.Background(), enclosure.Hold{Socket: socket, Token: helperToken, Dir: "/workspace"})
	if err != nil {
		t.Fatalf("taking the kept process back after the sweep: %v", err)
	}
	back.(enclosure.Dropper).Drop()
	for deadline := killed.Add(grace + time.Minute); execStatus(t, d, id, kept.id) == "running"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the kept exec outlived its relay's grace")
		}
	}
	attach(t, newDriver(t, Options{FIFODir: fifos}), id)
	if st := execStatus(t, d, id, kept.id); st != "not found" {
		t.Errorf("the kept exec after its relay ended it and another Attach: %s", st)
	}
	for _, e := range fifosLeft(d) {
		if token, _, _ := parseLeft(filepath.Base(e)); token == kept.owner {
			t.Errorf("left of the killed Berth: %s", e)
		}
	}
	onlySleep(t, id)
}

// execStatus is the exec's status as containerd tells it, or "not found".
func execStatus(t *testing.T, d *Driver, id, execID string) string {
	t.Helper()
	ctx, cancel := d.ctx(context.Background())
	defer cancel()
	ctr, err := d.cli.LoadContainer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	task, err := ctr.Task(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := task.LoadProcess(ctx, execID, nil)
	if cerrdefs.IsNotFound(err) {
		return "not found"
	}
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Status(ctx)
	if cerrdefs.IsNotFound(err) {
		return "not found"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(st.Status)
}

// A kept LookPath answer is given only while the task runs: once it has
// stopped, LookPath (and Start of a name) says so, as any other call.
//
// Issue 14 item 3.
func TestLookPathCacheEndsWhenTheTaskStops(t *testing.T) {
	id := run(t, "", enclosuretest.FullImage, "")
	d := newDriver(t, Options{})
	c := attach(t, d, id)
	for range 2 { // asked, then kept
		if p, err := c.LookPath(context.Background(), "sh"); err != nil || !strings.HasSuffix(p, "/sh") {
			t.Fatalf("LookPath(sh): %q, %v", p, err)
		}
	}
	killTask(t, id)
	p, err := c.LookPath(context.Background(), "sh")
	if !errors.Is(err, enclosure.ErrGone) || !strings.Contains(err.Error(), "task that is stopped (exit code 137)") || !strings.Contains(err.Error(), "start a new run") {
		t.Fatalf("LookPath(sh) after the task stopped: %q, %v", p, err)
	}
	if _, err := c.Start(context.Background(), enclosure.Cmd{Path: "sh"}); !errors.Is(err, enclosure.ErrGone) {
		t.Fatalf("Start(sh) after the task stopped: %v", err)
	}
}

// killTask kills the container's task with SIGKILL and waits (bounded)
// until containerd reports it stopped.
func killTask(t *testing.T, id string) {
	t.Helper()
	if _, err := containerdtest.Ctr("tasks", "kill", "-s", "KILL", id); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, _ := containerdtest.Ctr("tasks", "ls")
		if strings.Contains(out, id) && !strings.Contains(lineOf(out, id), "RUNNING") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task did not stop: %s", out)
		}
	}
}
