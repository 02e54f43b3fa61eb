package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// server is the real orchestrator binary, started as a harness starts it
// ("orchestrator serve --stdio --config FILE"), and the Go client of the
// harness protocol connected to its stdio.
type server struct {
	c      *rpc.Client
	dir    string // holds the binary and its configuration
	stderr *enclosure.Tail
	runs   int // runs started, for fresh conversation ids
}

// startServer builds ./cmd/orchestrator, writes a configuration naming the
// interpreter that has debugpy, starts serve --stdio and initializes.
func startServer(ctx context.Context, python string) (*server, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "berth-bench-debug-bin-")
	if err != nil {
		return nil, err
	}
	s := &server{dir: dir, stderr: enclosure.NewTail(1 << 20)}
	bin := filepath.Join(dir, "orchestrator")
	build := exec.CommandContext(ctx, "go", "build", "-tags", "berthtest", "-o", bin, "./cmd/orchestrator")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		s.remove()
		return nil, fmt.Errorf("building ./cmd/orchestrator: %v\n%s", err, out)
	}
	// The relay every host process runs under, next to the binary.
	if _, err := relaytest.Build(dir); err != nil {
		s.remove()
		return nil, err
	}
	cfg := filepath.Join(dir, "berth.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "debug:\n  python: %q\n", python), 0o600); err != nil {
		s.remove()
		return nil, err
	}
	cmd := exec.Command(bin, "serve", "--stdio", "--config", cfg)
	cmd.Stderr = s.stderr
	if s.c, err = rpc.DialCommand(cmd, rpc.ClientOptions{}); err != nil {
		s.remove()
		return nil, fmt.Errorf("starting %s serve --stdio: %w", bin, err)
	}
	if _, err := s.c.Initialize(ctx, "bench-debug", "1"); err != nil {
		s.close()
		return nil, fmt.Errorf("initialize: %w%s", err, s.said())
	}
	return s, nil
}

// close ends the connection, which makes serve --stdio end its runs and
// exit, waits for it, and removes the binary.
func (s *server) close() {
	_ = s.c.Close()
	s.remove()
}

func (s *server) remove() { _ = os.RemoveAll(s.dir) }

// said is the server's stderr, to explain a failure.
func (s *server) said() string {
	if t := strings.TrimSpace(s.stderr.String()); t != "" {
		return "\norchestrator said:\n" + t
	}
	return ""
}

// launch times one debug launch through the protocol: a fresh run (its
// own conversation) in dir, the breakpoint stored first, then the
// tools/call of launch, from sending it to its answer (JSON-RPC over the
// pipes, dispatch, detection, the session's handshake and the stop's
// location). terminate and run/stop follow, outside the timing.
func (s *server) launch(ctx context.Context, dir string, pr project) (time.Duration, error) {
	s.runs++
	r, err := s.c.StartRun(ctx, rpc.StartRunParams{Workdir: dir, ConversationID: fmt.Sprintf("bench-%d", s.runs)})
	if err != nil {
		return 0, fmt.Errorf("run/start: %w%s", err, s.said())
	}
	defer func() { _ = s.c.StopRun(ctx, r.RunID) }()
	call := func(args map[string]any) (string, error) {
		res, err := s.c.CallTool(ctx, r.RunID, orchestrator.SurfaceFull, "debug", args)
		if err != nil {
			return "", fmt.Errorf("tools/call debug %v: %w%s", args, err, s.said())
		}
		if res.IsError {
			return "", fmt.Errorf("debug %v: %s", args, res.FirstText())
		}
		return res.FirstText(), nil
	}
	if _, err := call(map[string]any{"operation": "breakpoints", "file": pr.file, "lines": []int{pr.line}}); err != nil {
		return 0, err
	}
	start := time.Now()
	out, err := call(map[string]any{"operation": "launch", "program": pr.program})
	took := time.Since(start)
	if err != nil {
		return 0, err
	}
	if !strings.Contains(out, "stopped (breakpoint)") {
		return 0, fmt.Errorf("launch did not stop at the breakpoint:\n%s", out)
	}
	if _, err := call(map[string]any{"operation": "terminate"}); err != nil {
		return 0, err
	}
	return took, nil
}

// moduleRoot is the directory of the main module's go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the Berth module: run this from the repository (go run ./bench/debug)")
	}
	return filepath.Dir(mod), nil
}
