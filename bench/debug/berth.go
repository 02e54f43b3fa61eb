package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/berth-dev/berth/bench/internal/berthserver"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
)

// server is the real orchestrator binary, started as a harness starts it
// ("orchestrator serve --stdio --config FILE") through berthserver.
type server struct {
	*berthserver.Server
	dir string // holds the binary and its configuration
}

// startServer builds ./cmd/orchestrator, writes a configuration naming the
// interpreter that has debugpy, starts serve --stdio and initializes.
func startServer(ctx context.Context, python string) (*server, error) {
	root, err := berthserver.ModuleRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "berth-bench-debug-bin-")
	if err != nil {
		return nil, err
	}
	bin, err := berthserver.Build(root, dir)
	if err == nil {
		// The relay every host process runs under, next to the binary.
		_, err = relaytest.Build(dir)
	}
	var s *berthserver.Server
	if err == nil {
		s, err = berthserver.Start(bin, dir, "debug", "bench-debug", fmt.Sprintf("debug:\n  python: %q\n", python))
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s.Ctx = ctx
	return &server{Server: s, dir: dir}, nil
}

// close ends the connection, which makes serve --stdio end its runs and
// exit, and removes the binary.
func (s *server) close() {
	s.Close()
	_ = os.RemoveAll(s.dir)
}

// launch times one debug launch through the protocol: a fresh run (its
// own conversation) in dir, the breakpoint stored first, then the
// tools/call of launch, from sending it to its answer (JSON-RPC over the
// pipes, dispatch, detection, the session's handshake and the stop's
// location). terminate and run/stop follow, outside the timing.
func (s *server) launch(ctx context.Context, dir string, pr project) (time.Duration, error) {
	run, err := s.StartRun(nil, dir, "bench")
	if err != nil {
		return 0, err
	}
	defer func() { _ = s.StopRun(run) }()
	if _, _, err := s.Call(run, "debug", map[string]any{"operation": "breakpoints", "file": pr.file, "lines": []int{pr.line}}); err != nil {
		return 0, err
	}
	took, out, err := s.Call(run, "debug", map[string]any{"operation": "launch", "program": pr.program})
	if err != nil {
		return 0, err
	}
	if !strings.Contains(out, "stopped (breakpoint)") {
		return 0, fmt.Errorf("launch did not stop at the breakpoint:\n%s", out)
	}
	if _, _, err := s.Call(run, "debug", map[string]any{"operation": "terminate"}); err != nil {
		return 0, err
	}
	return took, nil
}
