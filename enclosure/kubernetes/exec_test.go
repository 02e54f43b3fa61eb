package kubernetes

import (
	"bufio"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/docker/dockertest"
	"github.com/berth-dev/berth/enclosure/enclosuretest"
	"github.com/berth-dev/berth/enclosure/kubernetes/kubetest"
	"github.com/berth-dev/berth/enclosure/relay"
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
	for _, c := range []struct {
		refuse   bool
		protocol string
		want     kubetest.Negotiation
	}{
		{false, ProtocolWebSocket, kubetest.Negotiation{Subresource: "exec", Upgrade: "websocket", Protocol: "v5.channel.k8s.io"}},
		{true, ProtocolSPDY, kubetest.Negotiation{Subresource: "exec", Upgrade: "SPDY/3.1", Protocol: "v4.channel.k8s.io"}},
	} {
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
	if !strings.HasSuffix(p.Relay, "/relay-"+testRelay.Version+"/"+relay.Name) {
		t.Errorf("relay at %s, want a streamed copy of version %s", p.Relay, testRelay.Version)
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
