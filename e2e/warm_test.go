package e2e

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/orchestrator/rpc"
)

// Language servers across runs through the binary (issue 28 items 1 and
// 2): a run's gopls is parked when it ends and the next run on the same
// enclosure and root adopts that very process; with lsp.keep_warm: 0
// every server ends with its run, as before; a parked server ends at its
// deadline; Berth's stop ends what is parked.

// startStoppable starts "serve --stdio" with the configuration yaml and
// returns a client and stop, which closes its stdin and waits for it to
// exit (once: the test's cleanup calls it too).
func startStoppable(t *testing.T, yaml string) (*rpc.Client, func()) {
	t.Helper()
	cmd := command(nil, "serve", "--stdio", "--config", writeConfig(t, yaml))
	stderr := newStderr()
	cmd.Stderr = stderr
	c, err := rpc.DialCommand(cmd, rpc.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() { once.Do(func() { awaitExit(t, cmd, stderr, c.Close) }) }
	t.Cleanup(stop)
	if _, err := c.Initialize(testCtx(t), "berth-e2e", "test"); err != nil {
		t.Fatalf("initialize: %v\nstderr:\n%s", err, stderr.String())
	}
	return c, stop
}

// goplsLine reads, in lsp status, gopls's state and how it came, and its
// process as status names it (pid N, or relay tag T).
var goplsLine = regexp.MustCompile(`gopls for root \.: (\w+), (.*?), (pid \d+|relay tag \S+), up `)

// goplsOf waits until the run's gopls is ready and returns how it came
// and its process.
func goplsOf(t *testing.T, c *rpc.Client, run string) (how, process string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		st := text(callTool(t, c, run, "lsp", map[string]any{"action": "status"}))
		if m := goplsLine.FindStringSubmatch(st); m != nil && m[1] == "ready" {
			return m[2], m[3]
		}
		if time.Now().After(deadline) {
			t.Fatalf("gopls never got ready:\n%s", st)
		}
	}
}

// goplsReopened waits until the run's gopls, adopted at run/start, says
// it reopened n documents the run before used, and returns how it came
// and its process.
func goplsReopened(t *testing.T, c *rpc.Client, run string, n int) (how, process string) {
	t.Helper()
	want := fmt.Sprintf("%d document(s) the earlier run had open reopened", n)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if how, process = goplsOf(t, c, run); strings.Contains(how, want) {
			return how, process
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run's gopls never said %q: %s", want, how)
		}
	}
}

// firstReferences calls references as a run's first call and returns how
// long it took.
func firstReferences(t *testing.T, c *rpc.Client, run string) time.Duration {
	t.Helper()
	start := time.Now()
	res := callTool(t, c, run, "lsp", map[string]any{"action": "references", "file": "greet/greet.go", "line": 21, "symbol": "func Hello"})
	took := time.Since(start)
	if res.IsError || !strings.Contains(text(res), "main.go:13:20") {
		t.Fatalf("references: %s", text(res))
	}
	return took
}

// twoRunsInARow runs two runs one after the other on the go project in a
// fresh site of p, with Berth configured by yaml; parking says whether
// lsp.keep_warm is on. It checks what each run/stop and Berth's stop
// leave, and that the second run's gopls is the first's exactly when
// parking is on.
func twoRunsInARow(t *testing.T, p place, yaml string, parking bool) {
	s := p.fresh(t)
	copyProjectInto(t, "go", s.Dir)
	c, stop := startStoppable(t, yaml)

	first := s.start(t, c, nil)
	cold := firstReferences(t, c, first)
	_, process := goplsOf(t, c, first)
	if err := c.StopRun(testCtx(t), first); err != nil {
		t.Fatal(err)
	}
	s.waitNoProcesses(t, "the first run's stop")
	parked := s.parked(t)
	if want := []string{process}; parking && !slices.Equal(parked, want) || !parking && len(parked) != 0 {
		t.Fatalf("parked after the first run: %v (its gopls was %s; parking %v)", parked, process, parking)
	}
	before := s.named(t, "gopls")

	second := s.start(t, c, nil)
	how, again := goplsOf(t, c, second) // run/start's prewarm got it
	if parking {
		// Adopted, it reopens the document the first run used before
		// the second run's first call (lsp.reopen_max).
		how, again = goplsReopened(t, c, second, 1)
	}
	warm := firstReferences(t, c, second)
	after := s.named(t, "gopls")
	switch {
	case parking && (again != process || !strings.HasPrefix(how, "adopted at run/start (prewarm)")):
		t.Errorf("the second run's gopls: %s, %s; want the first's, %s, adopted at run/start", again, how, process)
	case parking && (len(after) == 0 || !slices.Equal(after, before)):
		// gopls may run a second process of its own (its crash monitor).
		t.Errorf("gopls processes before the second run %v, after its first call %v: want the same ones", before, after)
	case !parking && (again == process || !strings.HasPrefix(how, "started cold at run/start (prewarm)")):
		t.Errorf("with parking off the second run's gopls is %s (%s); the first's was %s", again, how, process)
	}
	t.Logf("%s, parking %v: first references, first run %s, second run %s", p, parking, cold.Round(time.Millisecond), warm.Round(time.Millisecond))
	if err := c.StopRun(testCtx(t), second); err != nil {
		t.Fatal(err)
	}
	s.waitNoProcesses(t, "the second run's stop")
	stop()
	s.waitNoProcesses(t, "Berth's stop") // nothing parked is left: the client is gone
}

// The second of two runs in a row on one root gets the first's gopls: the
// same process (pid), no gopls started, and status says it was adopted
// and reopened the document the first run had open.
// Between the runs, and after the second, only it is left; after Berth's
// stop, nothing.
//
// Issue 28 item 2.
func TestLSPServerIsAdoptedByTheNextRun(t *testing.T) {
	twoRunsInARow(t, onHost, "{}\n", true)
}

// With lsp.keep_warm: 0 runs behave as before parking: each run's gopls
// ends with it, and the next run starts its own.
//
// Issue 28 item 2.
func TestLSPServersEndWithTheirRunWithoutKeepWarm(t *testing.T) {
	twoRunsInARow(t, onHost, "lsp:\n  keep_warm: 0s\n", false)
}

// In a berth/full container the second run adopts the first's gopls too,
// named by its relay's pid.
//
// Issue 28 item 2.
func TestContainersDockerLSPServerIsAdoptedByTheNextRun(t *testing.T) {
	twoRunsInARow(t, inContainer(fullImage), "{}\n", true)
}

// A parked server ends at lsp.keep_warm after its run: within a second of
// the deadline nothing of the run is left, and status lists none.
//
// Issue 28 item 2.
func TestParkedLSPServerEndsAtKeepWarm(t *testing.T) {
	const keep = 3 * time.Second
	s := onHost.fresh(t)
	copyProjectInto(t, "go", s.Dir)
	c, _ := startStoppable(t, "lsp:\n  keep_warm: 3s\n")
	run := s.start(t, c, nil)
	firstReferences(t, c, run)
	if err := c.StopRun(testCtx(t), run); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	if parked := s.parked(t); len(parked) != 1 {
		t.Fatalf("parked after run/stop: %v, want gopls", parked)
	}
	for len(s.processes(t)) > 0 && time.Since(stopped) < keep+5*time.Second {
		time.Sleep(20 * time.Millisecond)
	}
	if gone := time.Since(stopped); gone > keep+time.Second {
		t.Errorf("the parked gopls was gone %s after run/stop, want within a second of %s", gone.Round(time.Millisecond), keep)
	}
	if parked := s.parked(t); len(parked) != 0 {
		t.Errorf("status still lists parked servers: %v", parked)
	}
}
