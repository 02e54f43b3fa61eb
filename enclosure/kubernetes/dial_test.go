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
	"github.com/berth-dev/berth/enclosure/enclosuretest"
	"github.com/berth-dev/berth/enclosure/kubernetes/kubetest"
)

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
	for _, c := range []struct {
		refuse   bool
		protocol string
		want     kubetest.Negotiation
	}{
		{false, ProtocolWebSocket, kubetest.Negotiation{Subresource: "portforward", Upgrade: "websocket", Protocol: "SPDY/3.1+portforward.k8s.io"}},
		{true, ProtocolSPDY, kubetest.Negotiation{Subresource: "portforward", Upgrade: "SPDY/3.1", Protocol: "portforward.k8s.io"}},
	} {
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
