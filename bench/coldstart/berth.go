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
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// python is the interpreter with debugpy, on the host and in the images.
const python = "/usr/bin/python3"

// buildServer builds ./cmd/orchestrator into tmp, next to the relay the
// caller builds there.
func buildServer(root, tmp string) (string, error) {
	bin := filepath.Join(tmp, "orchestrator")
	build := exec.Command("go", "build", "-tags", "berthtest", "-o", bin, "./cmd/orchestrator")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building ./cmd/orchestrator: %v\n%s", err, out)
	}
	return bin, nil
}

// hasWarm says whether the binary knows prewarm and parking (the keys
// lsp.prewarm_max and lsp.keep_warm; issue 28 items 1 and 2).
func hasWarm(bin string) (bool, error) {
	out, err := exec.Command(bin, "config").CombinedOutput()
	if err != nil {
		return false, fmt.Errorf("%s config: %v: %s", bin, err, out)
	}
	return strings.Contains(string(out), "keep_warm:") && strings.Contains(string(out), "prewarm_max:"), nil
}

// server is the orchestrator binary over stdio, as a harness starts it.
type server struct {
	c      *rpc.Client
	ctx    context.Context
	stderr *enclosure.Tail
	runs   int
}

// startServer writes berth-NAME.yaml (debug's interpreter, and the lsp
// keys of the mode) and starts bin serve --stdio with it.
func startServer(bin, tmp, name, lspYAML string) (*server, error) {
	cfg := filepath.Join(tmp, "berth-"+name+".yaml")
	yaml := fmt.Sprintf("debug:\n  python: %s\n%s", python, lspYAML)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		return nil, err
	}
	s := &server{ctx: context.Background(), stderr: enclosure.NewTail(1 << 20)}
	cmd := exec.Command(bin, "serve", "--stdio", "--config", cfg)
	cmd.Stderr = s.stderr
	c, err := rpc.DialCommand(cmd, rpc.ClientOptions{})
	if err != nil {
		return nil, err
	}
	s.c = c
	if _, err := c.Initialize(s.ctx, "bench-coldstart", "1"); err != nil {
		c.Close()
		return nil, fmt.Errorf("initialize: %w%s", err, s.said())
	}
	return s, nil
}

// close ends the connection: serve --stdio ends its runs (and every
// parked server) and exits.
func (s *server) close() { _ = s.c.Close() }

func (s *server) said() string {
	if t := strings.TrimSpace(s.stderr.String()); t != "" {
		return "\norchestrator said:\n" + t
	}
	return ""
}

// start starts a run in workdir at enc (nil: the host), for a
// conversation of its own.
func (s *server) start(enc *rpc.EnclosureParam, workdir string) (string, error) {
	s.runs++
	r, err := s.c.StartRun(s.ctx, rpc.StartRunParams{Workdir: workdir, Enclosure: enc,
		ConversationID: fmt.Sprintf("bench-coldstart-%d-%d", os.Getpid(), s.runs)})
	if err != nil {
		return "", fmt.Errorf("run/start: %w%s", err, s.said())
	}
	return r.RunID, nil
}

func (s *server) stop(run string) error {
	if err := s.c.StopRun(s.ctx, run); err != nil {
		return fmt.Errorf("run/stop: %w%s", err, s.said())
	}
	return nil
}

// call times one tools/call, from sending it to its answer.
func (s *server) call(run, tool string, args map[string]any) (time.Duration, string, error) {
	t0 := time.Now()
	res, err := s.c.CallTool(s.ctx, run, orchestrator.SurfaceFull, tool, args)
	d := time.Since(t0)
	if err != nil {
		return 0, "", fmt.Errorf("tools/call %s: %w%s", tool, err, s.said())
	}
	if res.IsError {
		return 0, "", fmt.Errorf("%s %v: %s", tool, args, res.FirstText())
	}
	return d, res.FirstText(), nil
}
