package orchestrator_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

func TestRunsStartValidatesAndOwns(t *testing.T) {
	rs := orchestrator.NewRuns(metrics.NewForTest(), time.Hour, hostOnly())
	ctx := context.Background()
	dir := t.TempDir()
	for _, p := range []orchestrator.StartParams{
		{Workdir: ""},
		{Workdir: "relative/dir"},
		{Workdir: dir + "/missing"},
		{Workdir: dir, Features: map[string]bool{"teleport": true}},
		{Workdir: dir, Enclosure: enclosure.Spec{Driver: "docker", ID: "abc"}},
		{Workdir: dir, Enclosure: enclosure.Spec{Driver: "bogus"}},
	} {
		if _, err := rs.Start(ctx, p); !errors.Is(err, orchestrator.ErrInvalid) {
			t.Errorf("Start(%+v) = %v, want ErrInvalid", p, err)
		}
	}
	run, err := rs.Start(ctx, orchestrator.StartParams{RunID: "a", Workdir: dir, Owner: "conn1", Enclosure: enclosure.Spec{Driver: "auto"}})
	if err != nil {
		t.Fatal(err)
	}
	if run.Enclosure.Driver() != "host" {
		t.Fatalf("auto chose %s", run.Enclosure.Driver())
	}
	if _, err := rs.Start(ctx, orchestrator.StartParams{RunID: "a", Workdir: dir, Owner: "conn1"}); err == nil {
		t.Fatal("duplicate run id accepted")
	}
	if _, err := rs.Get("a", "conn2"); !errors.Is(err, orchestrator.ErrUnknownRun) {
		t.Fatalf("other owner sees the run: %v", err)
	}
	if err := rs.Stop("a", "conn2"); !errors.Is(err, orchestrator.ErrUnknownRun) {
		t.Fatalf("other owner stops the run: %v", err)
	}
	ended := false
	run.OnEnd(func() { ended = true })
	rs.EndOwnedBy("conn1", orchestrator.EndDisconnect)
	if !ended || rs.Len() != 0 {
		t.Fatalf("EndOwnedBy left the run: ended=%v len=%d", ended, rs.Len())
	}
}

func TestReaperEndsIdleRuns(t *testing.T) {
	rs := orchestrator.NewRuns(metrics.NewForTest(), time.Minute, hostOnly())
	run, err := rs.Start(context.Background(), orchestrator.StartParams{Workdir: t.TempDir(), Owner: 1})
	if err != nil {
		t.Fatal(err)
	}
	rs.Reap(time.Now())
	if rs.Len() != 1 {
		t.Fatal("a fresh run was reaped")
	}
	rs.Reap(time.Now().Add(2 * time.Minute))
	if ended, why := run.Ended(); !ended || why != orchestrator.EndIdle || rs.Len() != 0 {
		t.Fatalf("idle run not reaped: %v %q", ended, why)
	}
}

func TestOnEndUnregisterAndValueAfterEnd(t *testing.T) {
	run := orchestrator.NewRun("r", "", t.TempDir(), host.New(), nil, nil)
	var ran []string
	run.OnEnd(func() { ran = append(ran, "kept") })
	unregister := run.OnEnd(func() { ran = append(ran, "dropped") })
	unregister()
	unregister()
	run.End("test")
	if len(ran) != 1 || ran[0] != "kept" {
		t.Fatalf("closers ran %v", ran)
	}
	c := &closeCounter{}
	run.Value("late", func() any { return c })
	if c.n != 1 {
		t.Fatalf("a value made after the run ended was closed %d times, want 1", c.n)
	}
}

type closeCounter struct{ n int }

func (c *closeCounter) Close() { c.n++ }

// TestRunRootClosedAtEnd: the run's workspace root holds a handle on the
// workdir (issue 11 item 2: reads and writes go through it); the run's end
// closes it, and a root is not made for an ended run.
func TestRunRootClosedAtEnd(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := orchestrator.NewRun("r", "c", dir, host.New(), nil, nil)
	root, err := run.Root()
	if err != nil {
		t.Fatal(err)
	}
	if b, err := root.ReadFile("f.txt"); err != nil || string(b) != "x" {
		t.Fatalf("ReadFile = %q, %v", b, err)
	}
	run.End("test over")
	if _, err := root.ReadFile("f.txt"); err == nil {
		t.Fatal("the root still reads after the run ended")
	}
	fresh := orchestrator.NewRun("r2", "c", dir, host.New(), nil, nil)
	fresh.End("test over")
	if _, err := fresh.Root(); err == nil {
		t.Fatal("an ended run made a root")
	}
}

// namedHarness is a harness that knows the run it serves.
type namedHarness struct {
	orchestrator.Harness
	runID string
}

// Runs.Start is the one place a run id is defaulted: a harness that names
// its run is built for the id Start picked, not for one its caller made
// up beforehand.
//
// Issue 12 item 4.
func TestStartDefaultsTheRunIDForItsHarness(t *testing.T) {
	rs := orchestrator.NewRuns(metrics.NewForTest(), time.Hour, hostOnly())
	newHarness := func(id string) orchestrator.Harness { return namedHarness{runID: id} }
	run, err := rs.Start(context.Background(), orchestrator.StartParams{Workdir: t.TempDir(), Owner: 1, NewHarness: newHarness})
	if err != nil {
		t.Fatal(err)
	}
	defer run.End(orchestrator.EndStopped)
	if h, ok := run.Harness.(namedHarness); !ok || h.runID != run.ID || !strings.HasPrefix(run.ID, "run_") {
		t.Fatalf("run %q has harness %+v", run.ID, run.Harness)
	}
	named, err := rs.Start(context.Background(), orchestrator.StartParams{RunID: "mine", Workdir: t.TempDir(), Owner: 1, NewHarness: newHarness})
	if err != nil {
		t.Fatal(err)
	}
	defer named.End(orchestrator.EndStopped)
	if h := named.Harness.(namedHarness); h.runID != "mine" {
		t.Fatalf("harness for %q", h.runID)
	}
}

// unmountedDriver attaches an enclosure that cannot see any host path, as
// a container that does not mount the workdir (the Docker driver's own
// tests refuse one for real).
type unmountedDriver struct{}

func (unmountedDriver) Name() string { return "fake" }
func (unmountedDriver) Attach(context.Context, string) (enclosure.Enclosure, error) {
	return unmounted{host.New()}, nil
}
func (unmountedDriver) Find(context.Context, string) ([]string, error) { return nil, nil }

type unmounted struct{ enclosure.Enclosure }

func (unmounted) Driver() string { return "fake" }
func (unmounted) MapPath(p string) (string, error) {
	return "", fmt.Errorf("%s is not mounted (mounts: /src -> /workspace): %w", p, enclosure.ErrNotFound)
}

// run/start refuses a workdir its enclosure cannot see, naming the mounts
// it found, and keeps no run.
//
// Issue 13 item 4.
func TestStartRefusesAWorkdirTheEnclosureCannotSee(t *testing.T) {
	rs := orchestrator.NewRuns(metrics.NewForTest(), time.Hour, &enclosure.Lookup{Host: host.New(), Drivers: map[string]enclosure.Driver{"fake": unmountedDriver{}}})
	_, err := rs.Start(context.Background(), orchestrator.StartParams{Workdir: t.TempDir(), Enclosure: enclosure.Spec{Driver: "fake", ID: "c1"}})
	if !errors.Is(err, orchestrator.ErrInvalid) || !strings.Contains(err.Error(), "mounts: /src -> /workspace") || !strings.Contains(err.Error(), "cannot see the workdir") {
		t.Fatalf("Start with an unmounted workdir: %v", err)
	}
	if n := rs.Len(); n != 0 {
		t.Fatalf("%d runs kept", n)
	}
}

// hostOnly is the lookup of a Berth with the host enclosure alone.
func hostOnly() *enclosure.Lookup { return &enclosure.Lookup{Host: host.New()} }
