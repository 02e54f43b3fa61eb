// Package e2e drives the real orchestrator binary through the harness
// protocol, over stdio, WebSocket and a unix socket, as a harness would.
//
// TestMain builds the binary once, and the relay next to it. The helpers below are shared by every
// tool family's end-to-end tests (e2e/<family>_test.go):
//
//	c := startStdio(t)                      // serve --stdio, connected client
//	run := newRun(t, c, dir, nil)           // run/start in dir (t.TempDir() if "")
//	res := callTool(t, c, run, "lsp", args) // tools/call on the full surface
//	text(res)                               // the result's text blocks
//
// The binary is built with -tags berthtest, which links the test-only
// tools; startStdio(t, testTools) also registers them
// (BERTH_TEST_TOOLS=1: test_echo, test_write, test_exec, test_panic,
// test_slow, test_serial, test_child, test_ask, test_reenter).
package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// binary is the orchestrator built for this test run.
var binary string

// testTools is the environment entry that registers the test-only tools.
const testTools = "BERTH_TEST_TOOLS=1"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "berth-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "orchestrator")
	args := []string{"build", "-tags", "berthtest", "-o", binary}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "../cmd/orchestrator")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the orchestrator:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	// The relay every process runs under, next to the binary, where
	// Berth looks for it; built as scripts/images builds the images' copy,
	// so a container's baked-in relay has its version.
	if _, err := relaytest.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines leaked:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// ctxFor returns a context that ends after d or with the test.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// testCtx is ctxFor(t, 2*time.Minute): enough for a cold language server.
func testCtx(t *testing.T) context.Context { return ctxFor(t, 2*time.Minute) }

// command builds "orchestrator args..." with env added to ours.
func command(env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// startStdio starts "orchestrator serve --stdio" with env added (e.g.
// testTools, "BERTH_X=y") and returns a client that has sent initialize.
// Cleanup closes stdin and waits for the process to exit; its stderr is
// logged if the test failed.
func startStdio(t *testing.T, env ...string) *rpc.Client {
	t.Helper()
	return startStdioArgs(t, env, "serve", "--stdio")
}

// startStdioArgs is startStdio with the command line given (e.g. "serve",
// "--stdio", "--config", file).
func startStdioArgs(t *testing.T, env []string, args ...string) *rpc.Client {
	t.Helper()
	cmd := command(env, args...)
	stderr := newStderr()
	cmd.Stderr = stderr
	c, err := rpc.DialCommand(cmd, rpc.ClientOptions{})
	if err != nil {
		t.Fatalf("starting %v: %v", args, err)
	}
	t.Cleanup(func() { awaitExit(t, cmd, stderr, c.Close) })
	if _, err := c.Initialize(testCtx(t), "berth-e2e", "test"); err != nil {
		t.Fatalf("initialize: %v\nstderr:\n%s", err, stderr.String())
	}
	return c
}

// awaitExit calls stop, which closes the child's stdin and waits for it,
// and fails the test unless the child exits cleanly within 30s (then it
// is killed). The child's stderr is logged if the test failed.
// newStderr keeps the last MiB of a child's stderr, logged if a test fails.
func newStderr() *enclosure.Tail { return enclosure.NewTail(1 << 20) }

func awaitExit(t *testing.T, cmd *exec.Cmd, stderr *enclosure.Tail, stop func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- stop() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("orchestrator exited badly: %v", err)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Errorf("orchestrator did not exit within 30s of its stdin closing")
	}
	if t.Failed() {
		t.Logf("orchestrator stderr:\n%s", stderr.String())
	}
}

// server is an "orchestrator serve" listening on TCP.
type server struct {
	Addr  string // host:port
	Token string
	// Stderr is everything the server printed so far.
	Stderr *enclosure.Tail
	cmd    *exec.Cmd
	// exited is closed when the process has exited, with exitErr set.
	exited  chan struct{}
	exitErr error
}

// wait waits up to d for the process to exit by itself and returns how it
// exited.
func (s *server) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-s.exited:
		return s.exitErr
	case <-time.After(d):
		t.Fatalf("orchestrator still running after %s", d)
	}
	return nil
}

// URL is the WebSocket endpoint.
func (s *server) URL() string { return "ws://" + s.Addr + rpc.RPCPath }

// HTTP is the base URL for /metrics, /healthz, /readyz.
func (s *server) HTTP() string { return "http://" + s.Addr }

var listeningRE = regexp.MustCompile(`listening on http://(\S+)`)

// startServe starts "orchestrator serve --listen 127.0.0.1:0 --token-file F
// extra..." with env added, waits for the address it prints, and stops it
// (SIGTERM) at cleanup.
func startServe(t *testing.T, env []string, extra ...string) *server {
	t.Helper()
	dir := t.TempDir()
	token := "e2e-token-" + strings.ReplaceAll(t.Name(), "/", "-")
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--token-file", tokenFile}, extra...)
	return startServeArgs(t, env, token, args...)
}

// startServeArgs starts the binary with args and waits for the listening
// line on stderr.
func startServeArgs(t *testing.T, env []string, token string, args ...string) *server {
	t.Helper()
	cmd := command(env, args...)
	pr, pw := io.Pipe()
	stderr := newStderr()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			stderr.Write([]byte(line + "\n"))
			if m := listeningRE.FindStringSubmatch(line); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	s := &server{Token: token, Stderr: stderr, cmd: cmd, exited: make(chan struct{})}
	go func() {
		s.exitErr = cmd.Wait()
		pw.Close()
		close(s.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-s.exited: // the test stopped it
		default:
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-s.exited:
				if s.exitErr != nil {
					t.Errorf("orchestrator did not exit cleanly on SIGINT: %v", s.exitErr)
				}
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-s.exited
				t.Errorf("orchestrator did not stop within 30s of SIGINT")
			}
		}
		<-copied
		if t.Failed() {
			t.Logf("orchestrator stderr:\n%s", stderr.String())
		}
	})
	select {
	case s.Addr = <-addr:
	case <-s.exited:
		<-copied
		t.Fatalf("orchestrator exited before listening: %v\n%s", s.exitErr, stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("orchestrator printed no listening address within 60s:\n%s", stderr.String())
	}
	return s
}

// dial connects a WebSocket client with the server's token and sends
// initialize; cleanup closes it.
func dial(t *testing.T, s *server) *rpc.Client {
	t.Helper()
	c, err := rpc.DialWebSocket(testCtx(t), s.URL(), s.Token, rpc.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Initialize(testCtx(t), "berth-e2e", "test"); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return c
}

// newRun starts a run in workdir (a fresh t.TempDir() when "") with the
// features given (nil: the defaults) and returns its id.
func newRun(t *testing.T, c *rpc.Client, workdir string, features map[string]bool) string {
	t.Helper()
	if workdir == "" {
		workdir = t.TempDir()
	}
	r, err := c.StartRun(testCtx(t), rpc.StartRunParams{Workdir: workdir, Features: features})
	if err != nil {
		t.Fatalf("run/start in %s: %v", workdir, err)
	}
	return r.RunID
}

// callTool calls a tool on the full surface; a protocol error fails the
// test (an isError result does not).
func callTool(t *testing.T, c *rpc.Client, runID, name string, args any) *orchestrator.Result {
	t.Helper()
	return callToolOn(t, c, runID, orchestrator.SurfaceFull, name, args)
}

// callToolOn is callTool on a given surface.
func callToolOn(t *testing.T, c *rpc.Client, runID string, surface orchestrator.Surface, name string, args any) *orchestrator.Result {
	t.Helper()
	res, err := c.CallTool(testCtx(t), runID, surface, name, args)
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

// toolNames lists the names tools/list returns for the surface.
func toolNames(t *testing.T, c *rpc.Client, runID string, surface orchestrator.Surface) []string {
	t.Helper()
	tools, err := c.ListTools(testCtx(t), runID, surface)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	return names
}

// text joins a result's text blocks.
func text(r *orchestrator.Result) string {
	var parts []string
	for _, b := range r.Content {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// rpcCode returns the JSON-RPC error code of err (0 if it is not one).
func rpcCode(err error) int64 {
	var e *rpc.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// mustJSON marshals v.
func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
