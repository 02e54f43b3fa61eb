package docker

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/docker/dockertest"
	"github.com/berth-dev/berth/enclosure/enclosuretest"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
	"github.com/berth-dev/berth/enclosure/relayexec"
)

// Issue 13 item 3.
func TestRelayBakedIntoTheImageIsUsed(t *testing.T) {
	want := relay.InstallPath(relaytest.Built().Version)
	if got := dockertest.Must(t, "image", "inspect", "-f", `{{index .Config.Labels "berth.relay"}}`, enclosuretest.FullImage); got != want {
		t.Fatalf("%s carries the relay %q, this tree builds %q: run scripts/images", enclosuretest.FullImage, got, want)
	}
	id := runContainer(t, "", enclosuretest.FullImage)
	c := attach(t, newDriver(t, Options{}), id)
	if c.Relay != want || c.RelayHow != "baked into the image" {
		t.Fatalf("relay %s (%s), want the baked %s", c.Relay, c.RelayHow, want)
	}
}

// Issue 13 item 3.
func TestRelayCopiedWithTheArchiveAPI(t *testing.T) {
	id := runContainer(t, "", enclosuretest.BaseImage)
	d := newDriver(t, Options{})
	c := attach(t, d, id)
	if c.Relay != relay.InstallPath(relaytest.Built().Version) || c.RelayHow != "archive copy" {
		t.Fatalf("relay %s (%s), want an archive copy at %s", c.Relay, c.RelayHow, relay.InstallPath(relaytest.Built().Version))
	}
	if c = attach(t, d, id); c.RelayHow != "installed by an earlier run" {
		t.Fatalf("a second attach: %s", c.RelayHow)
	}
	// Another Berth (a fresh driver) finds the copy and copies nothing.
	if c = attach(t, newDriver(t, Options{}), id); c.RelayHow != "found" {
		t.Fatalf("a fresh driver's attach: %s", c.RelayHow)
	}
	assertRuns(t, c)
}

// A tmpfs over /opt/berth hides the archive copy (the engine writes
// beneath it): the relay is streamed through sh into the tmpfs.
//
// Issue 13 item 3.
func TestRelayStreamedWhereATmpfsHidesTheArchiveCopy(t *testing.T) {
	id := runContainer(t, "", enclosuretest.BaseImage, "--tmpfs", "/opt/berth:exec")
	c := attach(t, newDriver(t, Options{}), id)
	if c.Relay != relay.InstallPath(relaytest.Built().Version) || c.RelayHow != "streamed through sh" {
		t.Fatalf("relay %s (%s), want it streamed to %s", c.Relay, c.RelayHow, relay.InstallPath(relaytest.Built().Version))
	}
	assertRuns(t, c)
}

// A read-only root takes no archive copy: the relay goes to a writable
// tmpfs that allows exec.
//
// Issue 13 item 3.
func TestRelayStreamedIntoATmpfsOfAReadOnlyContainer(t *testing.T) {
	id := runContainer(t, "", enclosuretest.BaseImage, "--read-only", "--tmpfs", "/tmp:exec")
	c := attach(t, newDriver(t, Options{}), id)
	if want := relay.InstallDir("/tmp/.berth", relaytest.Built().Version) + "/berth-relay"; c.Relay != want || c.RelayHow != "streamed through sh" {
		t.Fatalf("relay %s (%s), want it streamed to %s", c.Relay, c.RelayHow, want)
	}
	assertRuns(t, c)
}

// Issue 13 item 3.
func TestRelayOfAnotherArchitectureIsRefused(t *testing.T) {
	id := runContainer(t, "", enclosuretest.BaseImage)
	other := *relaytest.Built()
	other.Arch = "s390x"
	d := newDriver(t, Options{Shared: relayexec.Shared{Relay: func() (*relay.Binary, error) { return &other, nil }}})
	_, err := d.Attach(context.Background(), id)
	if !errors.Is(err, enclosure.ErrNotSupported) || !strings.Contains(err.Error(), "GOARCH=") {
		t.Fatalf("Attach with a relay for another architecture: %v", err)
	}
}

// assertRuns runs a program under the installed relay.
func assertRuns(t *testing.T, c *container) {
	t.Helper()
	p, err := c.Start(context.Background(), enclosure.Cmd{Path: "echo", Args: []string{"ok"}})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(p.Stdout())
	if code, err := p.Wait(); string(out) != "ok\n" || code != 0 || err != nil {
		t.Fatalf("echo ok: %q, exit %d, %v", out, code, err)
	}
}

// echoServer is a TCP echo server on the container's loopback; with a
// second argument, it first sends that many bytes (i % 251) unasked, as
// a server that speaks first does.
const echoServer = `
import socket, sys, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(64)
print("listening", flush=True)
greeting = bytes(i % 251 for i in range(int(sys.argv[2]) if len(sys.argv) > 2 else 0))
def serve(c):
    with c:
        c.sendall(greeting)
        while (b := c.recv(65536)):
            c.sendall(b)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
`

const echoPort = 47011

// startEcho starts the echo server in the container (no network: only
// its loopback exists) and returns once it listens.
func startEcho(t testing.TB, c *container, greeting ...int) enclosure.Process {
	t.Helper()
	args := []string{"-c", echoServer, strconv.Itoa(echoPort)}
	for _, n := range greeting {
		args = append(args, strconv.Itoa(n))
	}
	p, err := c.Start(context.Background(), enclosure.Cmd{Path: "python3", Args: args})
	if err != nil {
		t.Fatal(err)
	}
	if l, err := bufio.NewReader(p.Stdout()).ReadString('\n'); l != "listening\n" {
		errOut, _ := io.ReadAll(p.Stderr())
		t.Fatalf("echo server: %q, %v: %s", l, err, errOut)
	}
	t.Cleanup(func() { p.Kill(); <-p.Done() })
	return p
}

func echo(t testing.TB, conn net.Conn, msg string) {
	t.Helper()
	if _, err := io.WriteString(conn, msg); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != msg {
		t.Fatalf("echo: read %q, %v; want %q", buf, err, msg)
	}
}

// Issue 13 item 3.
func TestDialThroughTheRelay(t *testing.T) { testDial(t, DialRelay) }

// A server that speaks first (debugpy's adapter sends its events at
// once), through the real relay: Dial returns at once, and the
// connection reads every byte it said, in order, then echoes as before.
// The relay mostly writes its ready line before the greeting, so the
// buffer that holds a greeting ahead of the line is tested on a stream
// made to have it first (TestDialReadyComesThroughWhatAServerSaidFirst).
//
// Issue 13 item 3 (the dial's buffer before ready).
func TestDialThroughTheRelayKeepsWhatAServerSaysFirst(t *testing.T) {
	id := runContainer(t, "", enclosuretest.FullImage)
	c := attach(t, newDriver(t, Options{Config: Config{Dial: DialRelay}}), id)
	greeting := earlyOutput / 2
	server := startEcho(t, c, greeting)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 3 {
		start := time.Now()
		conn, err := c.Dial(ctx, echoPort)
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		got := make([]byte, greeting)
		if _, err := io.ReadFull(conn, got); err != nil {
			t.Fatalf("reading the %d bytes the server sent first: %v", greeting, err)
		}
		for i, b := range got {
			if b != byte(i%251) {
				t.Fatalf("the server's first bytes differ at %d: %d, want %d", i, b, i%251)
			}
		}
		echo(t, conn, "ping\n")
		conn.Close()
		t.Logf("Dial with %d KiB said first: %s", greeting>>10, took.Round(time.Millisecond))
	}
	server.Kill()
	<-server.Done()
	dockertest.OnlySleep(t, id)
}

// A root Berth on the engine's host may enter the container's network
// namespace instead (docker.dial: netns).
//
// Issue 13 item 3.
func TestDialThroughTheNetworkNamespace(t *testing.T) { testDial(t, DialNetns) }

func testDial(t *testing.T, how string) {
	id := runContainer(t, "", enclosuretest.FullImage)
	c := attach(t, newDriver(t, Options{Config: Config{Dial: how}}), id)
	server := startEcho(t, c)
	ctx := context.Background()
	conn, err := c.Dial(ctx, echoPort)
	if err != nil {
		t.Fatal(err)
	}
	echo(t, conn, "ping\n")
	echo(t, conn, strings.Repeat("x", 200<<10)) // more than one frame of the exec's stream
	conn.Close()

	_, err = c.Dial(ctx, echoPort+1)
	if err == nil || !strings.Contains(err.Error(), "nothing accepts connections on 127.0.0.1:"+strconv.Itoa(echoPort+1)) || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("Dial of a port nobody listens on: %v", err)
	}
	if _, err := c.Dial(ctx, 0); !errors.Is(err, enclosure.ErrInvalidConfig) {
		t.Fatalf("Dial(0): %v", err)
	}
	server.Kill()
	<-server.Done()
	dockertest.OnlySleep(t, id)
}

// The two ways of Dial, side by side: a new connection with one round
// trip (a DAP session's start), and a round trip on an open connection
// (each DAP message). Run with
//
//	go test -run '^$' -bench '^BenchmarkDial$' ./enclosure/docker/
//
// Issue 13 item 3.
func BenchmarkDial(b *testing.B) {
	id := runContainer(b, "", enclosuretest.FullImage)
	for _, how := range []string{DialRelay, DialNetns} {
		c := attach(b, newDriver(b, Options{Config: Config{Dial: how}}), id)
		if how == DialRelay {
			startEcho(b, c)
		}
		b.Run(how+"/connect", func(b *testing.B) {
			for b.Loop() {
				conn, err := c.Dial(context.Background(), echoPort)
				if err != nil {
					b.Fatal(err)
				}
				echo(b, conn, "ping\n")
				conn.Close()
			}
		})
		b.Run(how+"/roundtrip", func(b *testing.B) {
			conn, err := c.Dial(context.Background(), echoPort)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			msg := strings.Repeat("m", 512) + "\n"
			for b.Loop() {
				echo(b, conn, msg)
			}
		})
	}
}
