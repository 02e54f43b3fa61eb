package docker

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/docker/dockertest"
	"github.com/berth-dev/berth/enclosure/enclosuretest"
	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/enclosure/mounts"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
	"github.com/berth-dev/berth/enclosure/relayexec"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

// Issue 13 item 2.
func TestAttachByIDAndName(t *testing.T) {
	wd := enclosuretest.Workdir(t)
	name := "berth-test-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	id := runContainer(t, "", enclosuretest.FullImage, "--name", name, "-v", wd+":/workspace")
	d := newDriver(t, Options{})
	for _, ref := range []string{id, id[:12], name} {
		c := attach(t, d, ref)
		if c.Driver() != "docker" || c.ID() != id || c.name != name {
			t.Errorf("Attach(%s): driver %s, id %s, name %s", ref, c.Driver(), c.ID(), c.name)
		}
	}
	_, err := d.Attach(context.Background(), "berth-no-such-container")
	if !errors.Is(err, enclosure.ErrNotFound) || !strings.Contains(err.Error(), "docker ps") {
		t.Fatalf("a missing container: %v", err)
	}
}

// An engine that does not answer is skipped by auto with a log line, and
// is an error that says so when named.
//
// Issue 13 item 2.
func TestAutoSkipsAnEngineThatDoesNotAnswer(t *testing.T) {
	d := newDriver(t, Options{Config: Config{Host: "unix://" + t.TempDir() + "/no-engine.sock"}})
	var log strings.Builder
	l := &enclosure.Lookup{Host: host.New(), Drivers: map[string]enclosure.Driver{Name: d}, Auto: []string{Name},
		Log: slog.New(slog.NewTextHandler(&log, nil))}
	enc, err := l.Find(context.Background(), enclosure.Spec{Driver: "auto"}, "conv")
	if err != nil || enc.Driver() != "host" || !strings.Contains(log.String(), "did not answer") {
		t.Fatalf("auto without an engine: %v, %v; log %q", enc, err, log.String())
	}
	_, err = d.Attach(context.Background(), "anything")
	if !errors.Is(err, enclosure.ErrUnavailable) || !strings.Contains(err.Error(), "no-engine.sock") {
		t.Fatalf("Attach without an engine: %v", err)
	}
}

// Issue 13 item 2.
func TestStoppedContainerIsAnErrorAtAttachAndLater(t *testing.T) {
	wd := enclosuretest.Workdir(t)
	d := newDriver(t, Options{})
	stopped := runContainer(t, "", enclosuretest.FullImage, "-v", wd+":/workspace")
	dockertest.Must(t, "stop", "-t", "0", stopped)
	_, err := d.Attach(context.Background(), stopped)
	if !errors.Is(err, enclosure.ErrNotFound) || !strings.Contains(err.Error(), "is exited") || !strings.Contains(err.Error(), "never starts") {
		t.Fatalf("attach to a stopped container: %v", err)
	}

	id := runContainer(t, "", enclosuretest.FullImage, "-v", wd+":/workspace")
	c := attach(t, d, id)
	p, err := c.Start(context.Background(), enclosure.Cmd{Path: "sleep", Args: []string{"600"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.LookPath(context.Background(), "sleep"); err != nil { // now kept
		t.Fatal(err)
	}
	dockertest.Must(t, "stop", "-t", "1", id)
	// The running process ends with the container, and Wait says so.
	<-p.Done()
	if _, err := p.Wait(); !errors.Is(err, enclosure.ErrNotFound) || !strings.Contains(err.Error(), "is exited") {
		t.Fatalf("Wait of a process whose container stopped: %v", err)
	}
	ctx := context.Background()
	_, err = c.Start(ctx, enclosure.Cmd{Path: "/bin/true"})
	assertStopped(t, "Start", err, c.name)
	_, err = c.LookPath(ctx, "python3")
	assertStopped(t, "LookPath", err, c.name)
	_, err = c.LookPath(ctx, "sleep")
	assertStopped(t, "LookPath of a kept answer", err, c.name)
	_, err = c.Dial(ctx, 8000)
	assertStopped(t, "Dial", err, c.name)

	dockertest.Must(t, "rm", id)
	_, err = c.Start(ctx, enclosure.Cmd{Path: "/bin/true"})
	if !errors.Is(err, enclosure.ErrNotFound) || !strings.Contains(err.Error(), "no longer exists") {
		t.Fatalf("Start in a removed container: %v", err)
	}
}

func assertStopped(t *testing.T, call string, err error, name string) {
	t.Helper()
	if !errors.Is(err, enclosure.ErrNotFound) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "is exited") {
		t.Fatalf("%s in a stopped container: %v", call, err)
	}
}

// stdios are the two ways a process's stdin and stdout travel: the
// exec's stream (a start with no directory Berth shares), and the socket
// in the working directory (a start in the workdir's mount).
var stdios = []struct{ name, dir string }{{"exec stream", ""}, {"socket", "/workspace"}}

// forEachStdio runs test once per stdio path, with a container that
// mounts a workdir at /workspace; start checks that the path taken is the
// one named.
func forEachStdio(t *testing.T, test func(t *testing.T, c *container, dir string, id string)) {
	wd := enclosuretest.Workdir(t)
	id := runContainer(t, "", enclosuretest.FullImage, "-v", wd+":/workspace")
	c := attach(t, newDriver(t, Options{}), id)
	for _, s := range stdios {
		t.Run(s.name, func(t *testing.T) { test(t, c, s.dir, id) })
	}
}

// assertStdio fails the test when p's stdio did not take the path dir
// asks for (a socket in a directory Berth shares, else the exec's stream).
func assertStdio(t *testing.T, p enclosure.Process, socket bool) {
	t.Helper()
	if got := relayexec.ThroughSocket(p); got != socket {
		t.Fatalf("stdio through a socket: %v; want %v", got, socket)
	}
}

// Dropping the exec's connection without Kill (Berth's end of it gone)
// ends the run too: the relay reads its stdin's EOF.
//
// Issue 13 item 2.
func TestDroppedConnectionLeavesNothing(t *testing.T) {
	forEachStdio(t, func(t *testing.T, c *container, dir, id string) {
		p := startTree(t, c, dir)
		relayexec.Drop(p)
		<-p.Done()
		if _, err := io.ReadAll(p.Stdout()); err != nil {
			t.Fatalf("stdout after the drop: %v", err)
		}
		dockertest.OnlySleep(t, id)
	})
}

// startTree starts a program that leaves a child in its group and one in
// a session of its own, and waits until both run.
func startTree(t *testing.T, c *container, dir string) enclosure.Process {
	t.Helper()
	p, err := c.Start(context.Background(), enclosure.Cmd{Path: "sh", Args: []string{"-c", `sleep 601 & setsid sleep 602 & echo ready; wait`}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	assertStdio(t, p, dir != "")
	if l, err := bufio.NewReader(p.Stdout()).ReadString('\n'); l != "ready\n" {
		t.Fatalf("read %q, %v", l, err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ps := strings.Join(dockertest.Top(t, c.id), "\n")
		if strings.Contains(ps, "sleep 601") && strings.Contains(ps, "sleep 602") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tree did not start: %s", ps)
		}
	}
	return p
}

// SIGTERM goes in the relay's stdin, with no exec; when that stream is
// stalled (the program does not read its stdin, and a write filled the
// pipe), it goes by exec instead and still arrives.
//
// Issue 13 item 2.
func TestTermSignalInTheStreamOrByExec(t *testing.T) {
	id := runContainer(t, "", enclosuretest.FullImage)
	c := attach(t, newDriver(t, Options{}), id)
	for _, stalled := range []bool{false, true} {
		t.Run(map[bool]string{false: "in the stream", true: "stalled stream"}[stalled], func(t *testing.T) {
			p, err := c.Start(context.Background(), enclosure.Cmd{Path: "sh", Args: []string{"-c", `trap 'echo terminated; exit 3' TERM; echo ready; while :; do sleep 0.05; done`}})
			if err != nil {
				t.Fatal(err)
			}
			r := bufio.NewReader(p.Stdout())
			if l, _ := r.ReadString('\n'); l != "ready\n" {
				t.Fatalf("read %q", l)
			}
			if stalled {
				// More than the pipe, the relay and the connection hold:
				// this write blocks until the process is gone.
				go func() { _, _ = p.Stdin().Write(make([]byte, 16<<20)) }()
				time.Sleep(200 * time.Millisecond)
			}
			if err := p.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if l, _ := r.ReadString('\n'); l != "terminated\n" {
				t.Fatalf("after SIGTERM read %q", l)
			}
			if code, err := p.Wait(); code != 3 || err != nil {
				t.Fatalf("exit %d, %v; want 3", code, err)
			}
		})
	}
	dockertest.OnlySleep(t, id)
}

// Issue 13 item 2.
func TestLookPathUsesTheImagesPATH(t *testing.T) {
	wd := enclosuretest.Workdir(t)
	id := runContainer(t, "", enclosuretest.FullImage, "-v", wd+":/workspace")
	c := attach(t, newDriver(t, Options{}), id)
	ctx := context.Background()
	// go is on the image's PATH (/usr/local/go/bin, from its ENV), not
	// the engine's default.
	if p, err := c.LookPath(ctx, "go"); err != nil || p != "/usr/local/go/bin/go" {
		t.Fatalf("LookPath(go) = %q, %v", p, err)
	}
	_, err := c.LookPath(ctx, "no-such-tool")
	if !errors.Is(err, enclosure.ErrNotFound) || !strings.Contains(err.Error(), "/usr/local/go/bin") {
		t.Fatalf("LookPath of a missing tool: %v", err)
	}
}

// engineProxy stands between the driver and the real engine, so that a
// test can take the engine away (every connection cut, new ones refused)
// while the container runs on.
type engineProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newEngineProxy(t *testing.T) *engineProxy {
	t.Helper()
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "engine.sock"))
	if err != nil {
		t.Fatal(err)
	}
	p := &engineProxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e, err := net.Dial("unix", "/var/run/docker.sock")
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, e)
			p.mu.Unlock()
			go func() { io.Copy(e, c); e.Close() }()
			go func() { io.Copy(c, e); c.Close() }()
		}
	}()
	t.Cleanup(p.stop)
	return p
}

func (p *engineProxy) host() string { return "unix://" + p.ln.Addr().String() }

func (p *engineProxy) stop() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

// Done closes after Kill even when the engine no longer answers, and the
// process, cut off from Berth, ends in the container all the same.
//
// Issue 13 item 2.
func TestDoneClosesAfterKillWhenTheEngineIsGone(t *testing.T) {
	wd := enclosuretest.Workdir(t)
	id := runContainer(t, "", enclosuretest.FullImage, "-v", wd+":/workspace")
	for _, s := range stdios {
		t.Run(s.name, func(t *testing.T) {
			proxy := newEngineProxy(t)
			c := attach(t, newDriver(t, Options{Config: Config{Host: proxy.host()}}), id)
			p := startTree(t, c, s.dir)
			proxy.stop()
			p.Kill()
			<-p.Done()
			if _, err := p.Wait(); !errors.Is(err, enclosure.ErrUnavailable) {
				t.Fatalf("Wait after the engine went away: %v", err)
			}
			if _, err := io.ReadAll(p.Stdout()); err != nil {
				t.Fatalf("stdout after the engine went away: %v", err)
			}
			dockertest.OnlySleep(t, id)
			if _, err := c.Start(context.Background(), enclosure.Cmd{Path: "/bin/true", Dir: s.dir}); !errors.Is(err, enclosure.ErrUnavailable) || !strings.Contains(err.Error(), "did not answer") {
				t.Fatalf("Start without an engine: %v", err)
			}
		})
	}
}

// Start's context bounds the start only: the process outlives it.
//
// Issue 13 item 2.
func TestStartContextBoundsOnlyTheStart(t *testing.T) {
	wd := enclosuretest.Workdir(t)
	id := runContainer(t, "", enclosuretest.FullImage, "-v", wd+":/workspace")
	c := attach(t, newDriver(t, Options{}), id)
	ctx, cancel := context.WithCancel(context.Background())
	p, err := c.Start(ctx, enclosure.Cmd{Path: "cat"})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(p.Stdin(), "still here\n")
	if l, err := bufio.NewReader(p.Stdout()).ReadString('\n'); l != "still here\n" {
		t.Fatalf("after the start's context ended: %q, %v", l, err)
	}
	p.Stdin().Close()
	if code, err := p.Wait(); code != 0 || err != nil {
		t.Fatalf("cat after stdin closed: exit %d, %v", code, err)
	}
}

// A working directory the container does not have fails Start with the
// engine's reason, rather than passing it off as the program's output and
// exit code (126).
//
// Issue 13 item 2.
func TestStartInAMissingDirectoryFails(t *testing.T) {
	id := runContainer(t, "", enclosuretest.FullImage)
	c := attach(t, newDriver(t, Options{}), id)
	_, err := c.Start(context.Background(), enclosure.Cmd{Path: "pwd", Dir: "/no/such/dir"})
	if err == nil || !strings.Contains(err.Error(), "/no/such/dir") || !strings.Contains(err.Error(), "could not start") {
		t.Fatalf("Start in a missing directory: %v", err)
	}
	// A program that ends at once is started all the same.
	p, err := c.Start(context.Background(), enclosure.Cmd{Path: "true", Dir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(); code != 0 || err != nil {
		t.Fatalf("true: exit %d, %v", code, err)
	}
	dockertest.OnlySleep(t, id)
}

// The cost of a process in the container: Start of a program that exits
// at once, to its exit code, under the relay; and the same exec without
// the relay, for the relay's share. Run with
//
//	go test -run '^$' -bench '^BenchmarkStart$' ./enclosure/docker/
//
// Issue 13 item 2.
func BenchmarkStart(b *testing.B) {
	id := runContainer(b, "", enclosuretest.FullImage)
	c := attach(b, newDriver(b, Options{}), id)
	relaytest.BenchStart(b, c, c.run)
}

// Processes run as the container's default user, or as docker.user; the
// relay is installed as root either way.
//
// Issue 13 item 2.
func TestProcessesRunAsTheContainersUserOrDockerUser(t *testing.T) {
	uid := func(c *container) string {
		t.Helper()
		p, err := c.Start(context.Background(), enclosure.Cmd{Path: "id", Args: []string{"-u"}})
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(p.Stdout())
		if code, err := p.Wait(); code != 0 || err != nil {
			t.Fatalf("id -u: exit %d, %v", code, err)
		}
		return strings.TrimSpace(string(out))
	}
	id := runContainer(t, "", enclosuretest.BaseImage, "--user", "1000:1000")
	if got := uid(attach(t, newDriver(t, Options{}), id)); got != "1000" {
		t.Errorf("the container's default user 1000: ran as %s", got)
	}
	if got := uid(attach(t, newDriver(t, Options{Config: Config{User: "65534"}}), id)); got != "65534" {
		t.Errorf("docker.user 65534: ran as %s", got)
	}
}

// The workdir mounted at /workspace, and at another path: Berth maps
// through the mounts both ways, and the container's processes see the
// file there.
//
// Issue 13 item 4.
func TestMapPathAndHostPathThroughTheMounts(t *testing.T) {
	wd := enclosuretest.Workdir(t)
	os.MkdirAll(filepath.Join(wd, "pkg"), 0o755)
	os.WriteFile(filepath.Join(wd, "pkg", "a.txt"), []byte("from the host\n"), 0o644)
	d := newDriver(t, Options{})
	for _, dst := range []string{"/workspace", "/src/project"} {
		id := runContainer(t, "", enclosuretest.FullImage, "-v", wd+":"+dst)
		c := attach(t, d, id)
		in, err := c.MapPath(filepath.Join(wd, "pkg", "a.txt"))
		if err != nil || in != dst+"/pkg/a.txt" {
			t.Fatalf("MapPath = %q, %v; want %s/pkg/a.txt", in, err, dst)
		}
		if root, err := c.MapPath(wd); err != nil || root != dst {
			t.Fatalf("MapPath(workdir) = %q, %v", root, err)
		}
		back, err := c.HostPath(in)
		if err != nil || back != filepath.Join(wd, "pkg", "a.txt") {
			t.Fatalf("HostPath(%s) = %q, %v", in, back, err)
		}
		p, err := c.Start(context.Background(), enclosure.Cmd{Path: "cat", Args: []string{"pkg/a.txt"}, Dir: dst})
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(p.Stdout())
		if code, _ := p.Wait(); string(out) != "from the host\n" || code != 0 {
			t.Fatalf("cat in the container: %q, exit %d", out, code)
		}
		// A path outside every mount, either way, is refused with the
		// mounts named.
		other := enclosuretest.Workdir(t)
		_, err = c.MapPath(other)
		if !errors.Is(err, enclosure.ErrNotFound) || !strings.Contains(err.Error(), wd+" -> "+dst) || !strings.Contains(err.Error(), "bind-mount") {
			t.Fatalf("MapPath of an unmounted directory: %v", err)
		}
		if _, err := c.HostPath("/etc/passwd"); !errors.Is(err, enclosure.ErrNotFound) {
			t.Fatalf("HostPath(/etc/passwd): %v", err)
		}
	}
}

// When Berth runs in a container itself, its paths reach the host's
// through its own mounts. Berth's side is played by a real container:
// its own /proc/self files, read inside it, lead the driver to it, and
// its inspected mounts translate.
//
// Issue 13 item 4.
func TestBerthInAContainerThroughItsOwnMounts(t *testing.T) {
	wd := enclosuretest.Workdir(t)
	berth := runContainer(t, "", enclosuretest.BaseImage, "-v", wd+":/berth/checkout")
	mountinfo := dockertest.Must(t, "exec", berth, "cat", "/proc/self/mountinfo")
	cgroup := dockertest.Must(t, "exec", berth, "cat", "/proc/self/cgroup")
	hostname := dockertest.Must(t, "exec", berth, "hostname")
	if got := ownContainerID(mountinfo, cgroup, "not-an-id"); got != berth {
		t.Fatalf("ownContainerID read %q from the container's own files, want %s", got, berth)
	}
	target := runContainer(t, "", enclosuretest.FullImage, "-v", wd+":/workspace")
	d := newDriver(t, Options{})
	d.procSelf = func() (string, string, string) { return mountinfo, cgroup, hostname }
	assertBerthView(t, attach(t, d, target), "/berth/checkout", "Berth's own mounts")

	// With nothing but its hostname (the short id) to go by, Berth finds
	// its container too: the engine resolves the short id.
	d = newDriver(t, Options{})
	d.procSelf = func() (string, string, string) { return "", "0::/\n", hostname }
	assertBerthView(t, attach(t, d, target), "/berth/checkout", "the hostname")
}

// enclosure.path_map does the same where the engine does not know
// Berth's container.
//
// Issue 13 item 4.
func TestBerthInAContainerThroughThePathMap(t *testing.T) {
	wd := enclosuretest.Workdir(t)
	target := runContainer(t, "", enclosuretest.FullImage, "-v", wd+":/workspace")
	d := newDriver(t, Options{Shared: relayexec.Shared{PathMap: mounts.Table{{Source: wd, Destination: "/berth/checkout"}}}})
	d.procSelf = func() (string, string, string) {
		t.Fatal("the path map is configured, yet Berth looked for its own container")
		return "", "", ""
	}
	assertBerthView(t, attach(t, d, target), "/berth/checkout", "path_map")
}

func assertBerthView(t *testing.T, c *container, berthWD, how string) {
	t.Helper()
	in, err := c.MapPath(berthWD + "/main.go")
	if err != nil || in != "/workspace/main.go" {
		t.Fatalf("through %s: MapPath = %q, %v", how, in, err)
	}
	back, err := c.HostPath("/workspace/main.go")
	if err != nil || back != berthWD+"/main.go" {
		t.Fatalf("through %s: HostPath = %q, %v", how, back, err)
	}
	_, err = c.MapPath("/elsewhere/x")
	if !errors.Is(err, enclosure.ErrNotFound) || !strings.Contains(err.Error(), "enclosure.path_map") {
		t.Fatalf("through %s: MapPath of a path Berth has no mount for: %v", how, err)
	}
}

// Issue 13 item 4.
func TestOwnContainerIDFromCgroupOrHostname(t *testing.T) {
	id := strings.Repeat("0123456789abcdef", 4)
	for _, cgroup := range []string{
		"12:pids:/docker/" + id + "\n0::/\n",
		"0::/system.slice/docker-" + id + ".scope\n",
	} {
		if got := ownContainerID("", cgroup, ""); got != id {
			t.Errorf("ownContainerID(%q) = %q", cgroup, got)
		}
	}
	for _, hostname := range []string{"", "vm", "berth-sidecar", "0123456789ab0"} {
		if got := ownContainerID("", "0::/\n", hostname); got != "" {
			t.Errorf("no mountinfo, a private cgroup namespace and hostname %q: %q", hostname, got)
		}
	}
	if got := ownContainerID("", "0::/\n", "0123456789ab"); got != "0123456789ab" {
		t.Errorf("a short id as the hostname: %q", got)
	}
}

// run/start with the Docker driver: a mounted workdir gives a run in the
// container (its result names docker and the container's id); one the
// container does not mount is refused with the mounts found.
//
// Issue 13 item 4.
func TestRunStartRefusesAnUnmountedWorkdir(t *testing.T) {
	wd := enclosuretest.Workdir(t)
	conv := "conv-" + t.Name()
	id := runContainer(t, conv, enclosuretest.FullImage, "-v", wd+":/workspace")
	rs := orchestrator.NewRuns(metrics.NewForTest(), time.Hour, &enclosure.Lookup{Host: host.New(), Drivers: map[string]enclosure.Driver{Name: newDriver(t, Options{})}, Auto: []string{Name}})
	ctx := context.Background()
	run, err := rs.Start(ctx, orchestrator.StartParams{Workdir: wd, ConversationID: conv, Enclosure: enclosure.Spec{Driver: "auto"}})
	if err != nil {
		t.Fatal(err)
	}
	if run.Enclosure.Driver() != "docker" || run.Enclosure.ID() != id {
		t.Fatalf("the run's enclosure is %s %s, want docker %s", run.Enclosure.Driver(), run.Enclosure.ID(), id)
	}
	rs.StopAll()

	other := enclosuretest.Workdir(t)
	_, err = rs.Start(ctx, orchestrator.StartParams{Workdir: other, ConversationID: conv, Enclosure: enclosure.Spec{Driver: Name, ID: id}})
	if !errors.Is(err, orchestrator.ErrInvalid) || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), wd+" -> /workspace") {
		t.Fatalf("run/start with an unmounted workdir: %v", err)
	}
}
