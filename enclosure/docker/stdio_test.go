package docker

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/docker/dockertest"
	"github.com/berth-dev/berth/enclosure/mounts"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
)

// docker.stdio socket (the default): a process started in the workdir's
// mount, or below it, has the socket as its stdin and stdout, as the
// container's default user or docker.user; one started elsewhere, or
// with docker.stdio exec, has the exec's pipes. The socket's name is
// gone from the workdir once the program is connected.
//
// Issue 13 item 9.
func TestStdioThroughASocketInTheWorkdir(t *testing.T) {
	wd := workdir(t)
	if err := os.MkdirAll(filepath.Join(wd, "sub", "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Another user than Berth's must reach the directory: the socket
	// itself is writable by all.
	if err := os.Chmod(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	id := runContainer(t, "", fullImage, "-v", wd+":/workspace")
	for _, c := range []struct {
		name  string
		opts  Options
		dir   string
		kinds string
	}{
		{"the workdir", Options{}, "/workspace", "socket socket 0"},
		{"below it", Options{}, "/workspace/sub/dir", "socket socket 0"},
		{"docker.user", Options{User: "65534"}, "/workspace", "socket socket 65534"},
		{"a directory Berth does not see", Options{}, "/tmp", "pipe pipe 0"},
		{"docker.stdio exec", Options{Stdio: StdioExec}, "/workspace", "pipe pipe 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cont := attach(t, newDriver(t, c.opts), id)
			kinds, echo := relaytest.StdioKinds(t, cont, c.dir)
			if kinds != c.kinds || echo != "echoed" {
				t.Fatalf("stdin, stdout and uid %q, echo %q; want %q", kinds, echo, c.kinds)
			}
			relaytest.NoSocketLeft(t, wd)
			relaytest.NoSocketLeft(t, filepath.Join(wd, "sub", "dir"))
		})
	}
	dockertest.OnlySleep(t, id)
}

// Where Berth's view of the directory is not the container's (here an
// enclosure.path_map that points Berth elsewhere, as a file system shared
// through a VM would), the relay cannot connect: the start goes on in the
// exec's stream, a log line says why, and the container's next starts do
// not try again.
//
// Issue 13 item 9.
func TestStdioFallsBackWhenTheRelayCannotConnect(t *testing.T) {
	wd, elsewhere := workdir(t), workdir(t)
	id := runContainer(t, "", fullImage, "-v", wd+":/workspace")
	var log strings.Builder
	d := newDriver(t, Options{
		PathMap: mounts.Table{{Source: wd, Destination: elsewhere}},
		Log:     slog.New(slog.NewTextHandler(&log, nil)),
	})
	c := attach(t, d, id)
	relaytest.FellBack(t, c, "/workspace", c.Sockets.GivenUp, &log, "docker.stdio")
	relaytest.NoSocketLeft(t, wd)
	relaytest.NoSocketLeft(t, elsewhere)
	dockertest.OnlySleep(t, id)
}

// A process in the container that holds the socket's token (as if it
// had read it where the relay got it) and connects first is closed
// unread: only the exec's pid, as docker exec inspect gives it, may
// connect (issue 24 item 3).
func TestStdioSocketRefusesAStrangerWithTheToken(t *testing.T) {
	wd := workdir(t)
	id := runContainer(t, "", fullImage, "-v", wd+":/workspace")
	c := attach(t, newDriver(t, Options{}), id)
	l := c.Sockets.Listen("/workspace", relay.NewTag(), c.HostPath)
	if l == nil {
		t.Fatal("no socket in the workdir")
	}
	defer l.Close()
	relaytest.StrangerWithTheToken(t, c, l, "/workspace", func() (enclosure.Process, error) {
		return c.StartOn(context.Background(), "/bin/cat", relay.NewTag(), enclosure.Cmd{Path: "/bin/cat", Dir: "/workspace", Stderr: io.Discard}, l)
	})
	relaytest.NoSocketLeft(t, wd)
	dockertest.OnlySleep(t, id)
}
