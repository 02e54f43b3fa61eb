package containerd

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/mounts"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
	"github.com/berth-dev/berth/enclosure/relayexec"
)

// containerd.stdio socket (the default): a process started in the
// workdir's mount has the socket as its stdin and stdout; one started
// elsewhere, or with containerd.stdio exec, has pipes from the shim.
// Nothing is left in the workdir, nor of the exec.
//
// Issue 13 item 9.
func TestStdioThroughASocketInTheWorkdir(t *testing.T) {
	wd := workdir(t)
	if err := os.MkdirAll(filepath.Join(wd, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	id := run(t, "", fullImage, wd)
	for _, c := range []struct {
		name  string
		opts  Options
		dir   string
		kinds string
	}{
		{"the workdir", Options{}, "/workspace", "socket socket 0"},
		{"below it", Options{}, "/workspace/sub", "socket socket 0"},
		{"a directory Berth does not see", Options{}, "/tmp", "pipe pipe 0"},
		{"containerd.stdio exec", Options{Stdio: StdioExec}, "/workspace", "pipe pipe 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newDriver(t, c.opts)
			cont := attach(t, d, id)
			kinds, echo := relaytest.StdioKinds(t, cont, c.dir)
			if kinds != c.kinds || echo != "echoed" {
				t.Fatalf("stdin, stdout and uid %q, echo %q; want %q", kinds, echo, c.kinds)
			}
			relaytest.NoSocketLeft(t, wd)
			relaytest.NoSocketLeft(t, filepath.Join(wd, "sub"))
			noFIFOs(t, d, id)
		})
	}
	onlySleep(t, id)
}

// Kill in socket mode ends the tree, and the socket's reader sees EOF.
//
// Issue 13 item 9.
func TestSocketStdioKillLeavesNothing(t *testing.T) {
	id := run(t, "", fullImage, workdir(t))
	d := newDriver(t, Options{})
	c := attach(t, d, id)
	p, err := c.Start(context.Background(), enclosure.Cmd{Path: "sh", Args: []string{"-c", "sleep 1000 & sleep 1000 & echo up; wait"}, Dir: "/workspace"})
	if err != nil {
		t.Fatal(err)
	}
	if !relayexec.ThroughSocket(p) {
		t.Fatal("no socket in the workdir")
	}
	r := bufio.NewReader(p.Stdout())
	if line, err := r.ReadString('\n'); err != nil || line != "up\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	p.Kill()
	<-p.Done()
	if rest, err := io.ReadAll(r); err != nil || len(rest) != 0 {
		t.Fatalf("stdout after Kill: %q, %v", rest, err)
	}
	onlySleep(t, id)
	noFIFOs(t, d, id)
}

// Where the relay cannot reach the socket (Berth's view of the directory
// is not the container's), the start goes on with FIFOs, a log line says
// why once, and later starts do not try again.
//
// Issue 13 item 9.
func TestStdioFallsBackWhenTheRelayCannotConnect(t *testing.T) {
	wd, elsewhere := workdir(t), workdir(t)
	id := run(t, "", fullImage, wd)
	var log strings.Builder
	d := newDriver(t, Options{PathMap: mounts.Table{{Source: wd, Destination: elsewhere}}, Log: slog.New(slog.NewTextHandler(&log, nil))})
	c := attach(t, d, id)
	relaytest.FellBack(t, c, "/workspace", c.Sockets.GivenUp, &log, "containerd.stdio")
	relaytest.NoSocketLeft(t, wd)
	relaytest.NoSocketLeft(t, elsewhere)
	onlySleep(t, id)
	noFIFOs(t, d, id)
}

// A process in the container that holds the socket's token (as if it
// had read it where the relay got it) and connects first is closed
// unread: only the exec's pid, as containerd gives it, may connect
// (issue 24 item 3).
func TestContainerdStdioSocketRefusesAStrangerWithTheToken(t *testing.T) {
	wd := workdir(t)
	id := run(t, "", fullImage, wd)
	d := newDriver(t, Options{})
	c := attach(t, d, id)
	l := c.Sockets.Listen("/workspace", relay.NewTag(), c.HostPath)
	if l == nil {
		t.Fatal("no socket in the workdir")
	}
	defer l.Close()
	relaytest.StrangerWithTheToken(t, c, l, "/workspace", func() (enclosure.Process, error) {
		return c.StartOn(context.Background(), "/bin/cat", relay.NewTag(), enclosure.Cmd{Path: "/bin/cat", Dir: "/workspace", Stderr: io.Discard}, l)
	})
	relaytest.NoSocketLeft(t, wd)
	noFIFOs(t, d, id)
	onlySleep(t, id)
}
