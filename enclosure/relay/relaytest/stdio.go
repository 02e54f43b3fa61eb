package relaytest

import (
	"bufio"
	"context"
	"io"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relayexec"
)

// NoSocketLeft fails the test when a stdio socket's name is still in dir.
func NoSocketLeft(t *testing.T, dir string) {
	t.Helper()
	if matches, _ := filepath.Glob(filepath.Join(dir, ".berth-*")); len(matches) != 0 {
		t.Fatalf("left in the workdir: %v", matches)
	}
}

// strangerPy connects to the socket argv[1] with the token's line it
// reads on stdin, says "connected", and then "received N" once the
// connection ends (N bytes read from it).
const strangerPy = `import socket, sys
tok = sys.stdin.readline()
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(tok.encode())
print("connected", flush=True)
n = 0
while True:
    try:
        b = s.recv(65536)
    except OSError:
        break
    if not b:
        break
    n += len(b)
print("received", n, flush=True)
`

// StrangerWithTheToken checks that a process in c's container that
// holds a stdio socket's token (as if it had stolen it) and connects to
// it before the relay does is not taken for the relay, where the engine
// says which pid the relay has. The socket is in dir (as the container
// sees it; wd as Berth does), where the relay's exec of /bin/cat is
// started on it; the stranger runs in the container's /tmp, with the
// exec's pipes. The program echoes through its socket, the stranger
// receives nothing, and no socket is left in wd.
func StrangerWithTheToken(t *testing.T, c *relayexec.Container, dir, wd string) {
	t.Helper()
	l := c.Sockets.Listen(dir, relay.NewTag(), c.HostPath)
	if l == nil {
		t.Fatal("no socket in the workdir")
	}
	defer NoSocketLeft(t, wd)
	defer l.Close()
	var enc enclosure.Enclosure = c
	start := func() (enclosure.Process, error) {
		return c.StartOn(context.Background(), "/bin/cat", relay.NewTag(), enclosure.Cmd{Path: "/bin/cat", Dir: dir, Stderr: io.Discard}, l)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stderr strings.Builder
	s, err := enc.Start(ctx, enclosure.Cmd{Path: "/usr/bin/python3", Args: []string{"-c", strangerPy, path.Join(dir, l.Name)}, Dir: "/tmp", Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Kill(); _, _ = s.Wait() }()
	io.WriteString(s.Stdin(), l.TokenLine())
	out := bufio.NewReader(s.Stdout())
	if line, _ := out.ReadString('\n'); line != "connected\n" {
		t.Fatalf("the stranger did not connect: %q, stderr %q", line, stderr.String())
	}
	p, err := start()
	if err != nil {
		t.Fatalf("the start behind a stranger with the token: %v", err)
	}
	io.WriteString(p.Stdin(), "from Berth\n")
	p.Stdin().Close()
	echo, _ := io.ReadAll(p.Stdout())
	if code, err := p.Wait(); code != 0 || err != nil || string(echo) != "from Berth\n" {
		t.Errorf("the program behind a stranger with the token: exit %d, %v, echoed %q", code, err, echo)
	}
	if line, _ := out.ReadString('\n'); line != "received 0\n" {
		t.Errorf("the stranger with the token: %q, stderr %q; want its connection closed with nothing received", line, stderr.String())
	}
}
