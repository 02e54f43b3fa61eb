package kubernetes

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/enclosuretest"
	"github.com/berth-dev/berth/enclosure/kubernetes/kubetest"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
	"github.com/berth-dev/berth/enclosure/relayexec"
)

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
		{"the workspace", Options{Config: Config{Workspace: ws}}, "/workspace", "socket socket 0"},
		{"below it", Options{Config: Config{Workspace: ws}}, "/workspace/sub/dir", "socket socket 0"},
		{"a directory Berth does not see", Options{Config: Config{Workspace: ws}}, "/tmp", "pipe pipe 0"},
		{"no workspace volume", Options{}, "/workspace", "pipe pipe 0"},
		{"kubernetes.stdio exec", Options{Config: Config{Workspace: ws, Stdio: relayexec.StdioExec}}, "/workspace", "pipe pipe 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := attach(t, newDriver(t, s, c.opts), id)
			kinds, echo := relaytest.StdioKinds(t, p, c.dir)
			if kinds != c.kinds || echo != "echoed" {
				t.Fatalf("stdin, stdout and uid %q, echo %q; want %q", kinds, echo, c.kinds)
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
