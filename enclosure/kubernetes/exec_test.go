package kubernetes

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/docker/dockertest"
	"github.com/berth-dev/berth/enclosure/enclosuretest"
	"github.com/berth-dev/berth/enclosure/kubernetes/kubetest"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
	"github.com/berth-dev/berth/enclosure/relayexec"
)

// exec runs a program through the driver and returns its stdout, stderr
// and exit code, with stdin written and closed first.
func execIn(t *testing.T, p *pod, cmd enclosure.Cmd, stdin string) (string, string, string, int) {
	t.Helper()
	proc, err := p.Start(context.Background(), cmd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(proc.Stdin(), stdin); err != nil {
		t.Fatal(err)
	}
	// Closing stdin closes the program's alone: its output still flows.
	if err := proc.Stdin().Close(); err != nil {
		t.Fatal(err)
	}
	errc := make(chan string)
	go func() {
		b, _ := io.ReadAll(proc.Stderr())
		errc <- string(b)
	}()
	out, _ := io.ReadAll(proc.Stdout())
	errOut := <-errc
	code, err := proc.Wait()
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return *p.protocol.Load(), string(out), errOut, code
}

// Execs go over WebSocket (v5.channel.k8s.io, through the API server's
// stream translator), or over SPDY when the upgrade fails; on both, the
// program's stdin closes alone, its streams stay apart, and the exit code
// comes from the stream's error.
//
// Issue 16 item 3.
func TestExecOverWebSocketAndSPDYFallback(t *testing.T) {
	s := standIn(t)
	p := attach(t, newDriver(t, s, Options{}), runPod(t, s, kubetest.Pod{}))
	script := enclosure.Cmd{Path: "sh", Args: []string{"-c", "tr a-z A-Z; echo to-stderr >&2; exit 3"}}
	for _, c := range overBoth("exec", "v5.channel.k8s.io", "v4.channel.k8s.io") {
		s.RefuseWebSockets(c.refuse)
		before := len(s.Negotiated())
		protocol, out, errOut, code := execIn(t, p, script, "hello\n")
		if out != "HELLO\n" || errOut != "to-stderr\n" || code != 3 {
			t.Errorf("%s: stdout %q, stderr %q, exit %d; want HELLO, to-stderr, 3", c.protocol, out, errOut, code)
		}
		if protocol != c.protocol {
			t.Errorf("the exec went over %q, want %q", protocol, c.protocol)
		}
		if got := s.Negotiated()[before:]; !slices.Contains(got, c.want) || slices.ContainsFunc(got, func(n kubetest.Negotiation) bool { return n.Upgrade != c.want.Upgrade }) {
			t.Errorf("refuse WebSocket %v: the stand-in negotiated %+v; want %+v on every exec", c.refuse, got, c.want)
		}
	}
}

// The relay is the image's own when it carries this version, else
// streamed in through an exec of sh; Which finds programs on the PATH.
//
// Issue 16 item 3.
func TestRelayStreamedThroughExecAndWhichFindsPrograms(t *testing.T) {
	s := standIn(t)
	d := newDriver(t, s, Options{})
	p := attach(t, d, runPod(t, s, kubetest.Pod{Image: enclosuretest.BaseImage}))
	if !strings.HasSuffix(p.Relay, "/relay-"+relaytest.Built().Version+"/"+relay.Name) {
		t.Errorf("relay at %s, want a streamed copy of version %s", p.Relay, relaytest.Built().Version)
	}
	// A second attach finds the copy where the first put it.
	if again := attach(t, d, p.ID()); again.Relay != p.Relay {
		t.Errorf("second attach: relay at %s, want %s", again.Relay, p.Relay)
	}
	if path, err := p.LookPath(context.Background(), "sh"); err != nil || !strings.HasSuffix(path, "/sh") {
		t.Errorf("LookPath(sh) = %q, %v", path, err)
	}
	if _, err := p.LookPath(context.Background(), "no-such-program"); !errors.Is(err, enclosure.ErrNotFound) {
		t.Errorf("LookPath(no-such-program): %v; want ErrNotFound", err)
	}
	// Run as a user that cannot write /opt: the copy goes to a tmpfs root.
	user := attach(t, newDriver(t, s, Options{}), runPod(t, s, kubetest.Pod{Image: enclosuretest.BaseImage, DockerFlags: []string{"--user", "65534:65534"}}))
	if !strings.HasPrefix(user.Relay, "/tmp/") {
		t.Errorf("as nobody: relay at %s, want under /tmp", user.Relay)
	}
}

// The exec API takes no working directory or environment: the relay's sh
// sets them.
//
// Issue 16 item 3.
func TestWorkingDirectoryAndEnvironmentSetByTheRelay(t *testing.T) {
	s := standIn(t)
	p := attach(t, newDriver(t, s, Options{}), runPod(t, s, kubetest.Pod{Workdir: enclosuretest.Workdir(t)}))
	_, out, _, code := execIn(t, p, enclosure.Cmd{Path: "sh", Args: []string{"-c", `pwd; echo "$GREETING|$SPACED"`}, Dir: "/workspace", Env: []string{"GREETING=hi", "SPACED=a b  c"}}, "")
	if out != "/workspace\nhi|a b  c\n" || code != 0 {
		t.Errorf("dir and env: %q, exit %d", out, code)
	}
	_, _, errOut, code := execIn(t, p, enclosure.Cmd{Path: "/bin/true", Dir: "/no/such/dir"}, "")
	if code != 126 || !strings.Contains(errOut, "/no/such/dir") {
		t.Errorf("a missing dir: exit %d, stderr %q; want 126 naming it", code, errOut)
	}
}

// A container without a shell (a distroless image) still runs a process
// in its directory with its environment: the relay sets both itself.
//
// Issue 16 item 3.
func TestDirAndEnvNeedNoShell(t *testing.T) {
	s := standIn(t)
	id := runPod(t, s, kubetest.Pod{Workdir: enclosuretest.Workdir(t)})
	p := attach(t, newDriver(t, s, Options{}), id) // the relay installed, through sh if it must be
	dockertest.Must(t, "exec", s.ContainerID(id, "sandbox"), "rm", "/bin/sh", "/bin/dash")
	_, out, errOut, code := execIn(t, p, enclosure.Cmd{Path: "/usr/bin/realpath", Args: []string{"."}, Dir: "/workspace"}, "")
	if out != "/workspace\n" || code != 0 {
		t.Errorf("dir without sh: %q, exit %d, stderr %q", out, code, errOut)
	}
	_, out, errOut, code = execIn(t, p, enclosure.Cmd{Path: "/usr/bin/printenv", Args: []string{"GREETING", "SPACED"}, Env: []string{"GREETING=hi", "SPACED=a b  c"}}, "")
	if out != "hi\na b  c\n" || code != 0 {
		t.Errorf("env without sh: %q, exit %d, stderr %q", out, code, errOut)
	}
}

// A pod deleted while a process runs in it ends the process with an
// error that says so (ErrGone), and a new start says so too.
//
// Issue 16 item 3.
func TestPodDeletedMidCallIsErrGone(t *testing.T) {
	forEachStdio(t, podDeletedMidCall)
}

func podDeletedMidCall(t *testing.T, s *kubetest.Server, p *pod, id, dir string) {
	proc, err := p.Start(context.Background(), enclosure.Cmd{Path: "sh", Dir: dir, Args: []string{"-c", "echo started; sleep 1000"}})
	if err != nil {
		t.Fatal(err)
	}
	assertStdio(t, proc, dir != "")
	if line, _ := bufio.NewReader(proc.Stdout()).ReadString('\n'); line != "started\n" {
		t.Fatalf("first line %q", line)
	}
	s.DeletePod(id)
	select {
	case <-proc.Done():
	case <-time.After(time.Minute):
		t.Fatal("the process did not end with its pod")
	}
	if code, err := proc.Wait(); code != -1 || !errors.Is(err, enclosure.ErrGone) || !strings.Contains(err.Error(), id) {
		t.Errorf("pod deleted mid-call: exit %d, %v; want -1 and ErrGone naming the pod", code, err)
	}
	proc, err = p.Start(context.Background(), enclosure.Cmd{Path: "/bin/true"})
	if err == nil {
		_, err = proc.Wait()
	}
	if !errors.Is(err, enclosure.ErrGone) {
		t.Errorf("a start after the pod was deleted: %v; want ErrGone", err)
	}
}

// echoServer runs, in the pod, a TCP server on 127.0.0.1:port that
// answers each line with the line upper-cased, until the test ends.
func echoServer(t *testing.T, p *pod, port int) {
	t.Helper()
	script := fmt.Sprintf(`
import socket, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", %d))
s.listen()
print("listening", flush=True)
def serve(c):
    f = c.makefile("rwb")
    for line in f:
        f.write(line.upper()); f.flush()
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
`, port)
	proc, err := p.Start(context.Background(), enclosure.Cmd{Path: "python3", Args: []string{"-c", script}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { enclosure.Stop(proc, nil, 0) })
	if line, _ := bufio.NewReader(proc.Stdout()).ReadString('\n'); line != "listening\n" {
		t.Fatalf("echo server: %q", line)
	}
}

func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, msg+"\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != strings.ToUpper(msg)+"\n" {
		t.Fatalf("echo of %q: %q, %v", msg, line, err)
	}
}

// Dial port-forwards, a session of its own per connection, over SPDY
// tunnelled through WebSocket or over plain SPDY when the upgrade fails;
// a port nothing listens on is an error on the first read that says so.
//
// Issue 16 item 4.
func TestDialPortForwardsOverWebSocketAndSPDY(t *testing.T) {
	s := standIn(t)
	p := attach(t, newDriver(t, s, Options{}), runPod(t, s, kubetest.Pod{}))
	echoServer(t, p, 7777)
	for _, c := range overBoth("portforward", "SPDY/3.1+portforward.k8s.io", "portforward.k8s.io") {
		s.RefuseWebSockets(c.refuse)
		before := len(s.Negotiated())
		a, protocol, err := p.forward(context.Background(), 7777)
		if err != nil {
			t.Fatal(err)
		}
		if protocol != c.protocol {
			t.Errorf("the forward went over %q, want %q", protocol, c.protocol)
		}
		b, err := p.Dial(context.Background(), 7777)
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, a, "first")
		roundTrip(t, b, "second")
		a.Close()
		roundTrip(t, b, "after the first closed")
		b.Close()
		got := s.Negotiated()[before:]
		if len(got) != 2 || got[0] != c.want || got[1] != c.want {
			t.Errorf("refuse WebSocket %v: the stand-in negotiated %+v; want %+v for each of two sessions", c.refuse, got, c.want)
		}

		refused, err := p.Dial(context.Background(), 7778)
		if err != nil {
			t.Fatal(err)
		}
		_ = refused.SetDeadline(time.Now().Add(30 * time.Second))
		_, _ = io.WriteString(refused, "anyone?\n")
		if _, err := io.ReadAll(refused); err == nil || !strings.Contains(err.Error(), "nothing accepts connections on 127.0.0.1:7778") {
			t.Errorf("a port nothing listens on: read %v; want the forward's refusal", err)
		}
		refused.Close()
		// The refusal ended its own session only.
		again, err := p.Dial(context.Background(), 7777)
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, again, "after a refusal")
		again.Close()
	}
	if _, err := p.Dial(context.Background(), 0); !errors.Is(err, enclosure.ErrInvalidConfig) {
		t.Errorf("port 0: %v", err)
	}
}

// A Berth that is the pod's sidecar dials the pod's loopback, which is
// its own: here the test's.
//
// Issue 16 item 4.
func TestSidecarDialsLoopback(t *testing.T) {
	s := standIn(t)
	p := attach(t, newDriver(t, s, Options{Config: Config{Sidecar: true}}), runPod(t, s, kubetest.Pod{}))
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		line, _ := bufio.NewReader(c).ReadString('\n')
		_, _ = io.WriteString(c, strings.ToUpper(line))
	}()
	before := len(s.Negotiated())
	c, err := p.Dial(context.Background(), l.Addr().(*net.TCPAddr).Port)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, c, "loopback")
	c.Close()
	if got := s.Negotiated()[before:]; slices.ContainsFunc(got, func(n kubetest.Negotiation) bool { return n.Subresource == "portforward" }) {
		t.Errorf("a sidecar port-forwarded: %+v", got)
	}
}

// MapPath comes from the pod's volumeMounts of kubernetes.workspace_volume
// and Berth's own mount of the same volume; a workspace Berth cannot see
// is refused with the reason.
//
// Issue 16 item 5.
func TestMapPathFromTheWorkspaceVolume(t *testing.T) {
	s := standIn(t)
	wd := enclosuretest.Workdir(t)
	id := runPod(t, s, kubetest.Pod{Workdir: wd, MountPath: "/src/project"})
	p := attach(t, newDriver(t, s, Options{Config: Config{Workspace: Volume{Name: kubetest.WorkspaceVolume, Path: wd}}}), id)
	in, err := p.MapPath(filepath.Join(wd, "pkg", "a.go"))
	if err != nil || in != "/src/project/pkg/a.go" {
		t.Errorf("MapPath = %q, %v; want /src/project/pkg/a.go", in, err)
	}
	if out, err := p.HostPath("/src/project/pkg/a.go"); err != nil || out != filepath.Join(wd, "pkg", "a.go") {
		t.Errorf("HostPath = %q, %v", out, err)
	}
	// The mapped path is the file the pod's processes see.
	if err := os.MkdirAll(filepath.Join(wd, "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	execIn(t, p, enclosure.Cmd{Path: "sh", Args: []string{"-c", "echo seen > " + in}}, "")
	if b, err := os.ReadFile(filepath.Join(wd, "pkg", "a.go")); string(b) != "seen\n" {
		t.Errorf("the file the pod wrote at %s: %q, %v", in, b, err)
	}
	if _, err := p.MapPath("/elsewhere/x"); !errors.Is(err, enclosure.ErrNotFound) {
		t.Errorf("a path off the volume: %v; want ErrNotFound", err)
	}
	if _, err := p.HostPath("/etc/passwd"); !errors.Is(err, enclosure.ErrNotFound) {
		t.Errorf("HostPath off the volume: %v; want ErrNotFound", err)
	}
	// Berth mounts the volume where the pod does (the sidecar's usual
	// shape) when the path is not given.
	same := attach(t, newDriver(t, s, Options{Config: Config{Workspace: Volume{Name: kubetest.WorkspaceVolume}}}), id)
	if in, err := same.MapPath("/src/project/x"); err != nil || in != "/src/project/x" {
		t.Errorf("no path: MapPath = %q, %v; want the same path", in, err)
	}
	// A pod that mounts its conversation's directory of a shared volume
	// (subPath), as sandbox pods beside the harness do.
	if err := os.Mkdir(filepath.Join(wd, "conv-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	sub := runPod(t, s, kubetest.Pod{Workdir: wd, SubPath: "conv-1"})
	q := attach(t, newDriver(t, s, Options{Config: Config{Workspace: Volume{Name: kubetest.WorkspaceVolume, Path: wd}}}), sub)
	in, err = q.MapPath(filepath.Join(wd, "conv-1", "main.go"))
	if err != nil || in != "/workspace/main.go" {
		t.Errorf("subPath: MapPath = %q, %v; want /workspace/main.go", in, err)
	}
	execIn(t, q, enclosure.Cmd{Path: "sh", Args: []string{"-c", "echo sub > " + in}}, "")
	if b, err := os.ReadFile(filepath.Join(wd, "conv-1", "main.go")); string(b) != "sub\n" {
		t.Errorf("the file the pod wrote at %s: %q, %v", in, b, err)
	}
	if _, err := q.MapPath(filepath.Join(wd, "conv-2")); !errors.Is(err, enclosure.ErrNotFound) {
		t.Errorf("another conversation's directory: %v; want ErrNotFound", err)
	}
	rootHere := attach(t, newDriver(t, s, Options{Config: Config{Workspace: Volume{Name: kubetest.WorkspaceVolume}}}), sub)
	if in, err := rootHere.MapPath("/workspace/conv-1/x"); err != nil || in != "/workspace/x" {
		t.Errorf("subPath, Berth's mount where the pod's is: MapPath = %q, %v; want /workspace/x", in, err)
	}

	for _, c := range []struct {
		v    Volume
		want string
	}{
		{Volume{}, "kubernetes.workspace_volume is not set"},
		{Volume{Name: "cache", Path: wd}, `does not mount the workspace volume "cache"`},
	} {
		q := attach(t, newDriver(t, s, Options{Config: Config{Workspace: c.v}}), id)
		if _, err := q.MapPath(wd); !errors.Is(err, enclosure.ErrNotFound) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("workspace_volume %+v: %v; want ErrNotFound saying %q", c.v, err, c.want)
		}
	}
}

// kubernetes.stdio socket (the default): a process started in the
// workspace volume, or below it, has a socket there as its stdin and
// stdout, its token given on the relay's stdin; one started where Berth
// does not see the directory, without a workspace volume, or with
// kubernetes.stdio exec has the exec's pipes. The socket's name is gone
// once the program is connected.
func TestStdioThroughASocketInTheWorkspaceVolume(t *testing.T) {
	s := standIn(t)
	wd := enclosuretest.Workdir(t)
	if err := os.MkdirAll(filepath.Join(wd, "sub", "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	id := runPod(t, s, kubetest.Pod{Workdir: wd})
	ws := Volume{Name: kubetest.WorkspaceVolume, Path: wd}
	for _, c := range []struct {
		name  string
		opts  Options
		dir   string
		kinds string
	}{
		{"the workspace", Options{Config: Config{Workspace: ws}}, "/workspace", "socket socket"},
		{"below it", Options{Config: Config{Workspace: ws}}, "/workspace/sub/dir", "socket socket"},
		{"a directory Berth does not see", Options{Config: Config{Workspace: ws}}, "/tmp", "pipe pipe"},
		{"no workspace volume", Options{}, "/workspace", "pipe pipe"},
		{"kubernetes.stdio exec", Options{Config: Config{Workspace: ws, Stdio: relayexec.StdioExec}}, "/workspace", "pipe pipe"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := attach(t, newDriver(t, s, c.opts), id)
			kinds, echo := enclosuretest.StdioKinds(t, p, c.dir)
			if kinds != c.kinds || echo != "echoed" {
				t.Fatalf("stdin and stdout %q, echo %q; want %q", kinds, echo, c.kinds)
			}
			relaytest.NoSocketLeft(t, wd)
			relaytest.NoSocketLeft(t, filepath.Join(wd, "sub", "dir"))
		})
	}
}

// The exec subresource takes no environment, so the socket's token is
// the first line of the relay's stdin: it is neither on the relay's
// command line, which every process in the pod can read, nor in the
// program's environment.
func TestStdioTokenIsNotOnTheCommandLine(t *testing.T) {
	s := standIn(t)
	wd := enclosuretest.Workdir(t)
	p := attach(t, newDriver(t, s, Options{Config: Config{Workspace: Volume{Name: kubetest.WorkspaceVolume, Path: wd}}}), runPod(t, s, kubetest.Pod{Workdir: wd}))
	proc, err := p.Start(context.Background(), enclosure.Cmd{Path: "sh", Dir: "/workspace", Stderr: io.Discard,
		Args: []string{"-c", `tr '\0' ' ' < /proc/$PPID/cmdline; echo; env | grep -c BERTH_RELAY_TOKEN`}})
	if err != nil {
		t.Fatal(err)
	}
	assertStdio(t, proc, true)
	out, _ := io.ReadAll(proc.Stdout())
	if code, err := proc.Wait(); code != 1 || err != nil { // grep -c finds nothing: exit 1
		t.Fatalf("exit %d, %v; output %q", code, err, out)
	}
	cmdline, env, _ := strings.Cut(string(out), "\n")
	relayArgs, _, _ := strings.Cut(cmdline, " -- ") // the program's own arguments follow
	if !strings.Contains(relayArgs, "--token-stdin") || strings.Contains(relayArgs, "TOKEN") || strings.TrimSpace(env) != "0" {
		t.Fatalf("the relay's command line %q, token variables in the program's environment %q: want --token-stdin, no token", cmdline, env)
	}
}

// stdios are the two ways a process's stdin and stdout travel: the
// exec's stream (a start with no directory), and a socket (a start in the
// workspace volume).
var stdios = []struct{ name, dir string }{{"exec stream", ""}, {"socket", "/workspace"}}

// forEachStdio runs test once per stdio path, each with a pod of its own
// that mounts a workdir at /workspace, attached by a driver that sees it
// (kubernetes.workspace_volume).
func forEachStdio(t *testing.T, test func(t *testing.T, s *kubetest.Server, p *pod, id, dir string)) {
	for _, st := range stdios {
		t.Run(st.name, func(t *testing.T) {
			s := standIn(t)
			wd := enclosuretest.Workdir(t)
			id := runPod(t, s, kubetest.Pod{Workdir: wd})
			p := attach(t, newDriver(t, s, Options{Config: Config{Workspace: Volume{Name: kubetest.WorkspaceVolume, Path: wd}}}), id)
			test(t, s, p, id, st.dir)
			relaytest.NoSocketLeft(t, wd)
		})
	}
}

// assertStdio fails the test when p's stdio did not take the path asked
// for.
func assertStdio(t *testing.T, p enclosure.Process, socket bool) {
	t.Helper()
	if got := relayexec.ThroughSocket(p); got != socket {
		t.Fatalf("stdio through a socket: %v; want %v", got, socket)
	}
}

// upgrade is one way an exec or a port-forward goes: over WebSocket, or
// over SPDY once the stand-in refuses WebSocket, with what the stand-in
// negotiates for it.
type upgrade struct {
	refuse   bool
	protocol string
	want     kubetest.Negotiation
}

// overBoth is both ways for the subresource sub, with the subprotocol
// each negotiates.
func overBoth(sub, ws, spdy string) []upgrade {
	return []upgrade{
		{false, ProtocolWebSocket, kubetest.Negotiation{Subresource: sub, Upgrade: "websocket", Protocol: ws}},
		{true, ProtocolSPDY, kubetest.Negotiation{Subresource: sub, Upgrade: "SPDY/3.1", Protocol: spdy}},
	}
}
