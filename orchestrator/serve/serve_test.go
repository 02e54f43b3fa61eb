package serve

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newServer(limit int64) *rpc.Server {
	m := metrics.NewForTest()
	return &rpc.Server{Registry: orchestrator.NewRegistry(m, 0), Runs: orchestrator.NewRuns(m, 0, hostOnly()), Metrics: m, Version: "test", MaxMessageSize: limit}
}

// lines runs Run with o in the background, and returns the lines it
// writes to Stderr and the channel that gets Run's result.
func start(ctx context.Context, o Options) (lines <-chan string, done <-chan error) {
	r, w := io.Pipe()
	o.Stderr = w
	ch, res := make(chan string), make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- sc.Text()
		}
		close(ch)
	}()
	go func() {
		err := Run(ctx, o)
		_ = w.Close()
		res <- err
	}()
	return ch, res
}

// Run opens the TCP listener (with its token) and the unix socket (mode
// 0600), serves connections on both, and when its context ends closes
// them, ends every run and removes the socket.
func TestRunServesAndDrains(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "berth.sock")
	srv := newServer(0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lines, done := start(ctx, Options{Server: srv, Listen: "127.0.0.1:0", Token: "sesame", Unix: sock})
	var url string
	for url == "" {
		line := <-lines
		if rest, ok := strings.CutPrefix(line, "listening on http://"); ok {
			addr, _, _ := strings.Cut(rest, " ")
			url = "ws://" + addr + rpc.RPCPath
		}
	}
	<-lines // the unix socket's line: it is listening
	if st, err := os.Stat(sock); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the socket: %v, %v; want mode 0600", st, err)
	}
	if _, err := rpc.DialWebSocket(ctx, url, "wrong", rpc.ClientOptions{}); err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Fatalf("a wrong token: %v, want HTTP 401", err)
	}
	ws, err := rpc.DialWebSocket(ctx, url, "sesame", rpc.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ux, err := rpc.DialUnix(ctx, sock, rpc.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ux.Close()
	for _, c := range []*rpc.Client{ws, ux} {
		if _, err := c.StartRun(ctx, rpc.StartRunParams{Workdir: t.TempDir()}); err != nil {
			t.Fatal(err)
		}
	}
	if n := srv.Runs.Len(); n != 2 {
		t.Fatalf("%d runs, want 2", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	for range lines {
	}
	if n := srv.Runs.Len(); n != 0 {
		t.Errorf("%d runs left after Run returned", n)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("the socket is left behind: %v", err)
	}
	<-ws.Done()
	<-ux.Done()
}

// SIGTERM stops serving as the context's end does.
func TestRunStopsOnSIGTERM(t *testing.T) {
	lines, done := start(context.Background(), Options{Server: newServer(0), Listen: "127.0.0.1:0"})
	<-lines
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	for range lines {
	}
}

// SIGUSR2 is a handoff: Run stops taking work, closes its connections
// and listeners, removes its socket, and returns ErrHandedOff without
// ending a run (their kept processes are left to their relays).
//
// Issue 29 item 4.
func TestRunHandsOffOnSIGUSR2(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "berth.sock")
	srv := newServer(0)
	lines, done := start(context.Background(), Options{Server: srv, Unix: sock, HandoffTimeout: time.Second})
	<-lines
	ctx := context.Background()
	c, err := rpc.DialUnix(ctx, sock, rpc.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.StartRun(ctx, rpc.StartRunParams{RunID: "run-kept", Workdir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrHandedOff) {
		t.Fatalf("Run: %v, want ErrHandedOff", err)
	}
	for range lines {
	}
	if n := srv.Runs.Len(); n != 1 {
		t.Errorf("%d runs left after the handoff, want the one (ended by no one)", n)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("the socket is left behind: %v", err)
	}
	<-c.Done()
	srv.Runs.StopAll()
}

// pipes returns the server's stdin and stdout and the client's ends.
func pipes(t *testing.T) (stdin, stdout, toServer, fromServer *os.File) {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, f := range []*os.File{inR, inW, outR, outW} {
			_ = f.Close()
		}
	})
	return inR, outW, inW, outR
}

// With stdio alone, serving ends when stdin does, and the runs of the
// stdio connection end with it.
func TestRunEndsWithStdin(t *testing.T) {
	srv := newServer(0)
	stdin, stdout, toServer, fromServer := pipes(t)
	_, done := start(context.Background(), Options{Server: srv, Stdin: stdin, Stdout: stdout})
	f := rpc.NewStreamFramer(fromServer, toServer, nil, 0)
	ctx := context.Background()
	if err := f.Write(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"run/start","params":{"workdir":"`+t.TempDir()+`"}}`)); err != nil {
		t.Fatal(err)
	}
	if b, err := f.Read(ctx); err != nil || !strings.Contains(string(b), `"runId"`) {
		t.Fatalf("run/start: %s, %v", b, err)
	}
	_ = toServer.Close()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := srv.Runs.Len(); n != 0 {
		t.Errorf("%d runs left after Run returned", n)
	}
}

// A stdio stream out of step beyond recovery ends serving with an error
// wrapping rpc.ErrStreamLost when it was all that was served.
func TestRunStdioLostAlone(t *testing.T) {
	stdin, stdout, toServer, fromServer := pipes(t)
	_, done := start(context.Background(), Options{Server: newServer(1 << 10), Stdin: stdin, Stdout: stdout})
	go func() { _, _ = io.Copy(io.Discard, fromServer) }() // the one error reply
	// A bad header, then more than the message limit with no header in it.
	go func() { _, _ = io.WriteString(toServer, "Content-Length: x\r\n\r\n"+strings.Repeat("z", 20<<10)) }()
	if err := <-done; !errors.Is(err, rpc.ErrStreamLost) || !strings.HasPrefix(err.Error(), "stdio: ") {
		t.Fatalf("Run: %v, want stdio: ... ErrStreamLost", err)
	}
}

// A file that is not a socket is never removed to make room for one.
func TestListenUnixLeavesAFileInTheWay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "berth.sock")
	if err := os.WriteFile(path, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := Run(context.Background(), Options{Server: newServer(0), Unix: path})
	if err == nil || !strings.Contains(err.Error(), "a file that is not a socket is in the way") {
		t.Fatalf("Run: %v", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "mine" {
		t.Fatalf("the file in the way: %q, %v", b, err)
	}
}

// hostOnly is the lookup of a Berth with the host enclosure alone.
func hostOnly() *enclosure.Lookup { return &enclosure.Lookup{Host: host.New()} }
