package e2e

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/procfs"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

var vibeTools = []string{"vibe_kill", "vibe_list", "vibe_send", "vibe_spawn", "vibe_wait"}

// markedProcesses lists the live (not zombie) processes whose command line
// holds marker, on the host or in any container (the host's /proc shows
// them all), but not the relays that run them.
func markedProcesses(marker string) []string {
	return procfs.Strings(procfs.Filter(func(p procfs.Process) bool {
		return p.Live() && strings.Contains(p.Cmdline(), marker) && !strings.Contains(p.Cmdline(), "berth-relay")
	}))
}

// waitMarked waits until the number of live processes holding marker is
// n (a killed process may take a moment to finish exiting).
func waitMarked(t *testing.T, marker string, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if len(markedProcesses(marker)) == n {
			return
		}
	}
	t.Fatalf("processes marked %s: %v, want %d", marker, markedProcesses(marker), n)
}

// Workers through the protocol: run/update toggles vibe and tools/list
// follows; spawn, send, wait, kill and list; run/stop leaves no worker
// process behind.
func TestVibeWorkers(t *testing.T) { runFamily(t, onHost, vibeWorkers()) }

// vibeWorkers is the workers' family, with runners of its own.
func vibeWorkers() family {
	// The long-running worker sleeps for a number no other test uses, so
	// its processes can be found in /proc.
	marker := fmt.Sprint(400000 + rand.IntN(500000))
	steer := `assignment=$(cat)
case "$assignment" in
*finish*) printf '%s\n' "$assignment" ;;
*) sleep ` + marker + ` & wait ;;
esac`
	config := map[string]any{"vibe": map[string]any{
		"runners": map[string][]string{
			"fast": {"/bin/sh", "-c", steer},
			"good": {"/bin/sh", "-c", `cat >/dev/null; head -c 5000 /dev/zero | tr '\0' y`},
		},
		"output_limit": 2000,
	}}
	return family{name: "vibe", config: config, check: func(t *testing.T, c *rpc.Client, s *site) {
		vibeChecks(t, c, s, marker)
	}}
}

func vibeChecks(t *testing.T, c *rpc.Client, s *site, marker string) {
	run := s.start(t, c, nil)

	call := func(name string, args any, want ...string) string {
		t.Helper()
		res := callToolOn(t, c, run, orchestrator.SurfacePlan, name, args)
		if res.IsError {
			t.Fatalf("%s %v: %s", name, args, text(res))
		}
		for _, w := range want {
			if !strings.Contains(text(res), w) {
				t.Fatalf("%s %v: %q lacks %q", name, args, text(res), w)
			}
		}
		return text(res)
	}
	hasVibe := func() bool {
		names := toolNames(t, c, run, orchestrator.SurfacePlan)
		for _, v := range vibeTools {
			if slices.Contains(names, v) != slices.Contains(names, vibeTools[0]) {
				t.Fatalf("tools/list has some vibe tools but not all: %v", names)
			}
		}
		return slices.Contains(names, vibeTools[0])
	}

	if hasVibe() {
		t.Fatal("vibe is off by default, yet tools/list has the vibe tools")
	}
	if res := callTool(t, c, run, "vibe_list", map[string]any{}); !res.IsError || !strings.Contains(text(res), `feature "vibe" is off`) {
		t.Fatalf("vibe_list with vibe off: %+v", res)
	}
	if err := c.UpdateRun(testCtx(t), run, map[string]bool{orchestrator.FeatureVibe: true}); err != nil {
		t.Fatal(err)
	}
	if !hasVibe() {
		t.Fatal("after run/update vibe=true, tools/list lacks the vibe tools")
	}

	call("vibe_spawn", map[string]any{"brief": "port the parser", "label": "parser"}, "Spawned worker w1")
	call("vibe_wait", map[string]any{"worker_id": "w1", "timeout_seconds": 1}, "Still running: w1")
	waitMarked(t, marker, 2) // sh and its sleep
	call("vibe_send", map[string]any{"worker_id": "w1", "message": "finish with the new lexer"}, "its running attempt was stopped")
	call("vibe_wait", map[string]any{"worker_id": "w1"}, `w1 ("parser", tier fast) succeeded`,
		"port the parser", "Follow-up message 1", "finish with the new lexer")
	waitMarked(t, marker, 0)

	call("vibe_spawn", map[string]any{"brief": "b", "label": "loud", "tier": "good"}, "Spawned worker w2", "tier good")
	out := call("vibe_wait", map[string]any{"worker_id": "w2", "timeout_seconds": 30}, "succeeded", "[cut: showing the first 2000 of 5000 bytes]")
	if n := strings.Count(out, "y"); n < 2000 || n > 2010 {
		t.Fatalf("w2's result has %d y's, want the 2000 kept", n)
	}

	call("vibe_spawn", map[string]any{"brief": "work", "label": "doomed"}, "Spawned worker w3")
	call("vibe_spawn", map[string]any{"brief": "work", "label": "survivor"}, "Spawned worker w4")
	waitMarked(t, marker, 4)
	call("vibe_kill", map[string]any{"worker_id": "w3"}, "Killed w3")
	waitMarked(t, marker, 2)
	call("vibe_list", map[string]any{}, "4 worker(s): 1 running, 2 succeeded, 0 failed, 1 killed",
		`w1  "parser"  fast  succeeded`, `w2  "loud"  good  succeeded`, `w3  "doomed"  fast  killed`, `w4  "survivor"  fast  running`)
	if res := callTool(t, c, run, "vibe_wait", map[string]any{"worker_id": "w9"}); !res.IsError || !strings.Contains(text(res), `unknown worker "w9"`) {
		t.Fatalf("vibe_wait on an unknown worker: %+v", res)
	}

	// Switching vibe off hides the tools; the worker keeps running until
	// the run ends.
	if err := c.UpdateRun(testCtx(t), run, map[string]bool{orchestrator.FeatureVibe: false}); err != nil {
		t.Fatal(err)
	}
	if hasVibe() {
		t.Fatal("after run/update vibe=false, tools/list still has the vibe tools")
	}
	waitMarked(t, marker, 2)
	if err := c.StopRun(testCtx(t), run); err != nil {
		t.Fatal(err)
	}
	waitMarked(t, marker, 0)
	s.waitNoProcesses(t, "run/stop")
}

// A runner missing for a tier is a clear error naming the key to set.
func TestVibeWithoutRunners(t *testing.T) {
	c := startStdio(t)
	run := newRun(t, c, "", map[string]bool{orchestrator.FeatureVibe: true})
	res := callTool(t, c, run, "vibe_spawn", map[string]any{"brief": "b", "label": "l", "tier": "good"})
	if !res.IsError || !strings.Contains(text(res), "vibe.runners.good") {
		t.Fatalf("vibe_spawn with no runner configured: %+v", res)
	}
}
