// Package berthserver builds Berth's orchestrator and drives it over
// stdio, as a harness does, for the benchmarks that time calls through
// Berth.
package berthserver

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

// ModuleRoot is the directory of the main module's go.mod: the benchmarks
// run from the repository (go run ./bench/NAME).
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the Berth module: run the benchmark from the repository (go run ./bench/NAME)")
	}
	return filepath.Dir(mod), nil
}

// Build builds ./cmd/orchestrator of the module at root into tmp, with
// -tags berthtest, next to the relay the caller builds there (built as
// scripts/images builds the images' copy, so a container's baked-in relay
// is used).
func Build(root, tmp string) (string, error) {
	bin := filepath.Join(tmp, "orchestrator")
	build := exec.Command("go", "build", "-tags", "berthtest", "-o", bin, "./cmd/orchestrator")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building ./cmd/orchestrator: %v\n%s", err, out)
	}
	return bin, nil
}

// Server is the orchestrator binary over stdio.
type Server struct {
	C      *rpc.Client
	Ctx    context.Context
	stderr *enclosure.Tail
	runs   int // for fresh conversation ids
}

// Start writes yaml as berth-NAME.yaml in tmp and starts bin serve
// --stdio with it, initialized as client.
func Start(bin, tmp, name, client, yaml string) (*Server, error) {
	cfg := filepath.Join(tmp, "berth-"+name+".yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		return nil, err
	}
	s := &Server{Ctx: context.Background(), stderr: enclosure.NewTail(1 << 20)}
	cmd := exec.Command(bin, "serve", "--stdio", "--config", cfg)
	cmd.Stderr = s.stderr
	c, err := rpc.DialCommand(cmd, rpc.ClientOptions{})
	if err != nil {
		return nil, err
	}
	s.C = c
	if _, err := c.Initialize(s.Ctx, client, "1"); err != nil {
		c.Close()
		return nil, fmt.Errorf("initialize: %w%s", err, s.Said())
	}
	return s, nil
}

// Close ends the connection: serve --stdio ends its runs (and every
// parked server) and exits.
func (s *Server) Close() { _ = s.C.Close() }

// Said is what the orchestrator wrote to its stderr, for an error
// message ("" when nothing).
func (s *Server) Said() string {
	if t := strings.TrimSpace(s.stderr.String()); t != "" {
		return "\norchestrator said:\n" + t
	}
	return ""
}

// StartRun starts a run in workdir at enc (nil: the host), for a
// conversation of its own, named conversation-N.
func (s *Server) StartRun(enc *rpc.EnclosureParam, workdir, conversation string) (string, error) {
	s.runs++
	r, err := s.C.StartRun(s.Ctx, rpc.StartRunParams{Workdir: workdir, Enclosure: enc,
		ConversationID: fmt.Sprintf("%s-%d", conversation, s.runs)})
	if err != nil {
		return "", fmt.Errorf("run/start: %w%s", err, s.Said())
	}
	return r.RunID, nil
}

// StopRun stops run.
func (s *Server) StopRun(run string) error {
	if err := s.C.StopRun(s.Ctx, run); err != nil {
		return fmt.Errorf("run/stop: %w%s", err, s.Said())
	}
	return nil
}

// Call times one tools/call, from sending it to its answer; a tool's
// error answer is an error.
func (s *Server) Call(run, tool string, args map[string]any) (time.Duration, string, error) {
	t0 := time.Now()
	res, err := s.C.CallTool(s.Ctx, run, orchestrator.SurfaceFull, tool, args)
	d := time.Since(t0)
	if err != nil {
		return 0, "", fmt.Errorf("tools/call %s: %w%s", tool, err, s.Said())
	}
	if res.IsError {
		return 0, "", fmt.Errorf("%s %v: %s", tool, args, res.FirstText())
	}
	return d, res.FirstText(), nil
}
