package debug

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/internal/procfs"
	"github.com/berth-dev/berth/orchestrator"
)

// The prebuild (issue 28: a fresh container's first Go debug launch at
// most 2x the host's): run/start compiles, in the background, what the
// run's first delve launch would compile.

// uniquePackage makes the gonested fixture's svc module new to the build
// cache: a constant no other test wrote, in the package the program
// imports, so that whether it is compiled says whether the prebuild
// compiled it.
func uniquePackage(t *testing.T, dir string) {
	t.Helper()
	var b [8]byte
	_, _ = rand.Read(b[:])
	src := fmt.Sprintf("package greet\n\n// Stamp makes this copy of the package new to the build cache.\nconst Stamp = %q\n", hex.EncodeToString(b[:]))
	if err := os.WriteFile(filepath.Join(dir, "svc", "internal", "greet", "stamp.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

// compiledByLaunch builds the svc program as delve builds it and returns
// the packages of the svc module the build compiled (not found in the
// build cache).
func compiledByLaunch(t *testing.T, dir string) []string {
	t.Helper()
	cmd := exec.Command("go", "build", "-x", "-gcflags=all=-N -l", "-o", filepath.Join(t.TempDir(), "app"), "./cmd/app")
	cmd.Dir = filepath.Join(dir, "svc")
	cmd.Env = append(os.Environ(), "CGO_CFLAGS=-O0 -g")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build: %v\n%s", err, stderr.String())
	}
	var compiled []string
	for _, line := range strings.Split(stderr.String(), "\n") {
		if !strings.Contains(line, "/compile ") {
			continue
		}
		for _, pkg := range []string{"example.com/svc/internal/greet", "example.com/svc/cmd/app"} {
			if strings.Contains(line, "-p "+pkg+" ") || (pkg == "example.com/svc/cmd/app" && strings.Contains(line, "-p main ")) {
				compiled = append(compiled, pkg)
			}
		}
	}
	return compiled
}

// waitPrebuild waits until the run's status says want of its prebuild.
func waitPrebuild(t *testing.T, e *env, want string) string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st := e.p.prebuildsOf(e.run).describe(e.run.Workdir)
		if strings.Contains(st, want) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("the prebuild never said %q; it says:\n%s", want, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestARunsStartCompilesWhatItsFirstLaunchWouldCompile(t *testing.T) {
	// Without a prebuild, the build a launch runs compiles the module's
	// packages: the check below can tell.
	control := newEnv(t, "gonested", func(c *Config) { c.PrebuildMax = 0 })
	uniquePackage(t, control.dir)
	control.reg.RunStarted(control.run)
	if got := compiledByLaunch(t, control.dir); len(got) != 2 {
		t.Fatalf("with no prebuild, delve's build compiled %v, want both of svc's packages", got)
	}
	if st := control.ok(`{"operation":"status"}`); strings.Contains(st, "prebuild") {
		t.Errorf("debug.prebuild_max 0 still prebuilt:\n%s", st)
	}

	e := newEnv(t, "gonested", nil)
	uniquePackage(t, e.dir)
	e.reg.RunStarted(e.run)
	st := waitPrebuild(t, e, "done in")
	// debug.prebuild_max is 1: svc, the first root in the walk's order
	// of the two at the same depth, and not tool.
	has(t, st, "prebuild (delve, svc): done in", "a launch there finds its packages compiled")
	if strings.Contains(st, "tool") {
		t.Errorf("debug.prebuild_max 1 prebuilt a second root:\n%s", st)
	}
	if got := compiledByLaunch(t, e.dir); len(got) != 0 {
		t.Errorf("after the prebuild, delve's build still compiled %v", got)
	}
	e.ok(`{"operation":"status"}`, "prebuild (delve, svc): done in")
	if n := testutil.ToFloat64(e.metrics.DebugPrebuilds.WithLabelValues("delve", "done")); n != 1 {
		t.Errorf("berth_debug_prebuilds_total{adapter=delve,result=done} is %v, want 1", n)
	}
	if n := histogramCount(t, e.metrics.DebugPrebuildDuration.WithLabelValues("delve")); n != 1 {
		t.Errorf("berth_debug_prebuild_duration_seconds{adapter=delve} counted %d prebuilds, want 1", n)
	}
	// It wrote nothing in the working directory: go list -export links
	// no binary.
	if _, err := os.Stat(filepath.Join(e.dir, "svc", "app")); !os.IsNotExist(err) {
		t.Errorf("the prebuild wrote a file in the working directory: %v", err)
	}
}

// slowPrebuild tunes the delve entry's prebuild into a process that
// writes its pid to .prebuild-pid at the top of the working directory
// (the prebuild runs in svc) and sleeps: a fault injected beside the
// real delve, which the launch case still uses.
func slowPrebuild(c *Config) {
	delve(c).Prebuild = []string{"sh", "-c", "echo $$ > ../.prebuild-pid; exec sleep 120"}
}

// prebuildPid waits for the slow prebuild's pid in the working directory
// dir.
func prebuildPid(t *testing.T, dir string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(filepath.Join(dir, ".prebuild-pid")); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatal("the prebuild never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestAPrebuildEndsWithItsRunALaunchOrItsTimeout(t *testing.T) {
	t.Run("the run ends", func(t *testing.T) {
		e := newEnv(t, "gonested", slowPrebuild)
		e.reg.RunStarted(e.run)
		pid := prebuildPid(t, e.dir)
		has(t, waitPrebuild(t, e, "running for"), "a launch there now ends it")
		if n := testutil.ToFloat64(e.metrics.DebugPrebuildsRunning); n != 1 {
			t.Errorf("berth_debug_prebuilds_running is %v, want 1", n)
		}
		e.run.End("test")
		// End waits for the prebuild's process, and on the host Wait
		// returns once the relay has reaped its tree.
		if ps, ok := procfs.Read(pid); ok {
			t.Fatalf("the prebuild's program %d is still in the process table (state %c) when the run's end returned", pid, ps.State)
		}
		if n := testutil.ToFloat64(e.metrics.DebugPrebuilds.WithLabelValues("delve", "cancelled")); n != 1 {
			t.Errorf("berth_debug_prebuilds_total{result=cancelled} is %v, want 1", n)
		}
		if n := testutil.ToFloat64(e.metrics.DebugPrebuildsRunning); n != 0 {
			t.Errorf("berth_debug_prebuilds_running is %v after the run's end, want 0", n)
		}
	})
	t.Run("a launch in its root", func(t *testing.T) {
		e := newEnv(t, "gonested", slowPrebuild)
		e.reg.RunStarted(e.run)
		pid := prebuildPid(t, e.dir)
		e.ok(`{"operation":"launch","program":"svc/cmd/app"}`, "launched svc/cmd/app with delve")
		waitGone(t, pid) // the launch's build does not run beside it
		has(t, e.p.prebuildsOf(e.run).describe(e.dir), "prebuild (delve, svc): ended: a launch in its root came first")
		e.ok(`{"operation":"terminate"}`)
		noProcess(t, e.dir)
	})
	t.Run("its timeout", func(t *testing.T) {
		e := newEnv(t, "gonested", func(c *Config) { slowPrebuild(c); c.PrebuildTimeout = 300 * time.Millisecond })
		e.reg.RunStarted(e.run)
		pid := prebuildPid(t, e.dir)
		has(t, waitPrebuild(t, e, "ended after"), "it ran past debug.prebuild_timeout")
		waitGone(t, pid)
		if n := testutil.ToFloat64(e.metrics.DebugPrebuilds.WithLabelValues("delve", "timeout")); n != 1 {
			t.Errorf("berth_debug_prebuilds_total{result=timeout} is %v, want 1", n)
		}
	})
}

// waitGone waits for pid to be gone, for up to 10 s: a prebuild a
// launch or its timeout ends is waited for by nothing the test can
// wait on.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for procfs.Alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still runs", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestAFailedPrebuildSaysWhyAndWhatALaunchDoes(t *testing.T) {
	t.Run("a package that does not compile", func(t *testing.T) {
		e := newEnv(t, "gonested", nil)
		uniquePackage(t, e.dir)
		broken := "package greet\n\nfunc Broken() int { return \"not an int\" }\n"
		if err := os.WriteFile(filepath.Join(e.dir, "svc", "internal", "greet", "broken.go"), []byte(broken), 0o644); err != nil {
			t.Fatal(err)
		}
		e.reg.RunStarted(e.run)
		has(t, waitPrebuild(t, e, "failed after"), "broken.go:3:", "cannot use", "a launch there compiles what it did not, and says what fails")
		if n := testutil.ToFloat64(e.metrics.DebugPrebuilds.WithLabelValues("delve", "failed")); n != 1 {
			t.Errorf("berth_debug_prebuilds_total{result=failed} is %v, want 1", n)
		}
	})
	t.Run("a command that exits non-zero", func(t *testing.T) {
		e := newEnv(t, "gonested", func(c *Config) {
			delve(c).Prebuild = []string{"sh", "-c", "echo first >&2; echo 'cannot find package' >&2; exit 3"}
		})
		e.reg.RunStarted(e.run)
		has(t, waitPrebuild(t, e, "failed after"), "(exit status 3: cannot find package)")
	})
}

// delve is the delve entry of c's catalog.
func delve(c *Config) *Adapter {
	for i := range c.Adapters {
		if c.Adapters[i].ID == "delve" {
			return &c.Adapters[i]
		}
	}
	panic("no delve entry in the catalog")
}

// histogramCount is how many observations h has.
func histogramCount(t *testing.T, h prometheus.Observer) uint64 {
	t.Helper()
	var m dto.Metric
	if err := h.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

func TestOnePrebuildRunsPerRootAndTwoInAll(t *testing.T) {
	// Two runs on one root in one enclosure share one prebuild: it
	// outlives the run that started it, and ends with the last.
	first := newEnv(t, "gonested", slowPrebuild)
	first.reg.RunStarted(first.run)
	pid := prebuildPid(t, first.dir)
	p := first.p
	second := orchestrator.NewRun("run-2", "conv-2", first.dir, host.New(), nil, nil)
	t.Cleanup(func() { second.End("test over") })
	p.RunStarted(second)
	p.prebuildsOf(second).wg.Wait() // its start has looked, and shares the first one's
	has(t, p.prebuildsOf(second).describe(first.dir), "prebuild (delve, svc): running for")
	if n := testutil.ToFloat64(first.metrics.DebugPrebuildsRunning); n != 1 {
		t.Fatalf("berth_debug_prebuilds_running is %v with two runs on one root, want 1", n)
	}
	first.run.End("test")
	if !procfs.Alive(pid) {
		t.Fatal("the shared prebuild ended with the run that started it, while another run still wanted it")
	}
	second.End("test")
	if procfs.Alive(pid) { // it ends with the last run that wanted it, before its end returns
		t.Fatal("the shared prebuild outlived the end of the last run that wanted it")
	}
	has(t, p.prebuildsOf(second).describe(first.dir), "prebuild (delve, svc): ended: the runs that wanted it ended")

	// Runs on roots of their own each get a prebuild, two at once in
	// all: one Berth's provider shares its places.
	var runs []*orchestrator.Run
	for i := range 3 {
		dir := t.TempDir()
		if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "gonested"))); err != nil {
			t.Fatal(err)
		}
		run := orchestrator.NewRun(fmt.Sprintf("run-%d", i+3), fmt.Sprintf("conv-%d", i+3), dir, host.New(), nil, nil)
		t.Cleanup(func() { run.End("test over") })
		p.RunStarted(run)
		runs = append(runs, run)
	}
	// Two of the three run, one queues.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil && testutil.ToFloat64(first.metrics.DebugPrebuildsRunning) != 2 {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // a third, were the cap not kept, would have started
	if n := testutil.ToFloat64(first.metrics.DebugPrebuildsRunning); n != 2 {
		t.Fatalf("berth_debug_prebuilds_running is %v, want 2 (prebuildConcurrency)", n)
	}
	queued := map[bool]int{}
	for _, run := range runs {
		queued[strings.Contains(p.prebuildsOf(run).describe(run.Workdir), "queued for")]++
	}
	if queued[true] != 1 || queued[false] != 2 {
		t.Errorf("%d of 3 prebuilds say they are queued, want 1", queued[true])
	}
	// A run's end frees its place for a queued one.
	for _, run := range runs {
		if !strings.Contains(p.prebuildsOf(run).describe(run.Workdir), "queued for") {
			run.End("test")
			break
		}
	}
	for ctx.Err() == nil && queued[true] != 0 {
		queued = map[bool]int{}
		for _, run := range runs {
			queued[strings.Contains(p.prebuildsOf(run).describe(run.Workdir), "queued for")]++
		}
		time.Sleep(10 * time.Millisecond)
	}
	if queued[true] != 0 {
		t.Errorf("after a run's end freed its place, %d prebuilds are still queued, want none", queued[true])
	}
}

func TestPrebuildConfigurationIsChecked(t *testing.T) {
	for _, tc := range []struct {
		name string
		tune func(*Config)
		want string
	}{
		{"prebuild_max below 0", func(c *Config) { c.PrebuildMax = -1 }, "debug.prebuild_max is -1"},
		{"prebuild_max past its bound", func(c *Config) { c.PrebuildMax = maxPrebuilds + 1 }, "0 (off) to 8"},
		{"no timeout", func(c *Config) { c.PrebuildTimeout = 0 }, "debug.prebuild_timeout must be a positive duration"},
		{"an empty command", func(c *Config) { delve(c).Prebuild = []string{""} }, "prebuild must start with a program's name"},
		{"an environment entry without =", func(c *Config) { delve(c).PrebuildEnv = []string{"CGO_CFLAGS"} }, "prebuild_env must hold KEY=VALUE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.tune(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want an error with %q", err, tc.want)
			}
		})
	}
	c := DefaultConfig()
	c.PrebuildMax, c.PrebuildTimeout = 0, 0
	if err := c.Validate(); err != nil {
		t.Errorf("prebuilds off need no timeout: %v", err)
	}
}

func TestALaunchBeforeTheRunsPrebuildKeepsItsRootFromBeingPrebuilt(t *testing.T) {
	// The run's start is still looking (a container's LookPath takes an
	// exec) when the launch comes: the launch builds, and the start
	// then prebuilds nothing there.
	e := newEnv(t, "gonested", slowPrebuild)
	e.ok(`{"operation":"launch","program":"svc/cmd/app"}`, "launched svc/cmd/app with delve")
	e.p.RunStarted(e.run)
	e.p.prebuildsOf(e.run).wg.Wait()
	if st := e.p.prebuildsOf(e.run).describe(e.dir); st != "" {
		t.Errorf("a root the run launched in was prebuilt after the launch:\n%s", st)
	}
	if _, err := os.Stat(filepath.Join(e.dir, ".prebuild-pid")); !os.IsNotExist(err) {
		t.Errorf("the prebuild ran: %v", err)
	}
	e.ok(`{"operation":"terminate"}`)
}

func TestPrebuildRootsAreTheShallowestFirstAndNoFixtures(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"b", "a", "a/inner", "testdata/mod", "_old", "tools/testdata/x"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, d, "go.mod"), []byte("module x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := prebuildRoots(dir, []string{"go.mod"})
	want := []string{filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "a", "inner")}
	if !slices.Equal(got, want) {
		t.Errorf("prebuildRoots = %v, want %v", got, want)
	}
}

// A prebuild whose command exits leaving a child that holds its output
// open (a build daemon) ends all the same, and the child with it:
// nothing it started outlives it. The relay ends the program's tree when
// the program exits; the prebuild's 5 s bound on reading its output
// covers a process that escaped it.
func TestAPrebuildsLeftoverChildEndsWithIt(t *testing.T) {
	e := newEnv(t, "gonested", func(c *Config) {
		delve(c).Prebuild = []string{"sh", "-c", "sleep 120 & echo $! > ../.prebuild-pid; exit 0"}
	})
	e.reg.RunStarted(e.run)
	pid := prebuildPid(t, e.dir)
	waitPrebuild(t, e, "done in")
	waitGone(t, pid)
}

// TestAPrebuildWhoseOutputAnotherProcessHoldsEndsAtTheBound: a process
// outside the prebuild's tree that holds its output open (possible on a
// host without the relay; here the output is joined to a pipe the test
// holds) keeps neither the prebuild nor the run's end waiting past
// prebuildDrainWait.
func TestAPrebuildWhoseOutputAnotherProcessHoldsEndsAtTheBound(t *testing.T) {
	defer func(d time.Duration) { prebuildDrainWait = d }(prebuildDrainWait)
	prebuildDrainWait = 300 * time.Millisecond
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(); r.Close() })
	e := newEnvIn(t, "gonested", func(c *Config) {
		delve(c).Prebuild = []string{"sh", "-c", "exit 0"}
	}, func(string) enclosure.Enclosure { return heldOutput{host.New(), r} })
	e.reg.RunStarted(e.run)
	has(t, waitPrebuild(t, e, "done in"), "prebuild (delve")
	ended := make(chan struct{})
	go func() { e.run.End("test"); close(ended) }()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the run's end waited on a prebuild whose output another process holds open")
	}
}

// heldOutput is an enclosure whose processes' stdout goes on, after the
// process's own, with what held gives: an output another process holds
// open.
type heldOutput struct {
	enclosure.Enclosure
	held io.Reader
}

func (h heldOutput) Start(ctx context.Context, cmd enclosure.Cmd) (enclosure.Process, error) {
	p, err := h.Enclosure.Start(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return heldStdout{p, io.MultiReader(p.Stdout(), h.held)}, nil
}

type heldStdout struct {
	enclosure.Process
	out io.Reader
}

func (p heldStdout) Stdout() io.Reader { return p.out }
