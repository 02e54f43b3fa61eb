package vibe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/procfs"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

func TestMain(m *testing.M) { relaytest.Main(m) }

// script is the argv that runs testdata/<name>.sh with /bin/sh.
func script(t *testing.T, name string) []string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", name+".sh"))
	if err != nil {
		t.Fatal(err)
	}
	return []string{"/bin/sh", p}
}

type fixture struct {
	reg     *orchestrator.Registry
	metrics *metrics.Metrics
	prov    *Provider
	run     *orchestrator.Run
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	return newFixtureIn(t, cfg, func(string) enclosure.Enclosure { return host.New() })
}

// newFixtureIn is newFixture in the enclosure encFor returns for the
// working directory.
func newFixtureIn(t *testing.T, cfg Config, encFor func(dir string) enclosure.Enclosure) *fixture {
	t.Helper()
	m := metrics.NewForTest()
	p, err := New(cfg, m)
	if err != nil {
		t.Fatal(err)
	}
	reg := orchestrator.NewRegistry(m, time.Minute)
	reg.Add(p)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	run := orchestrator.NewRun("r1", "c1", dir, encFor(dir), nil, map[string]bool{orchestrator.FeatureVibe: true})
	t.Cleanup(func() { run.End("test") })
	return &fixture{reg: reg, metrics: m, prov: p, run: run}
}

func config(fast, good []string) Config {
	c := DefaultConfig()
	c.Runners = Runners{Fast: fast, Good: good}
	return c
}

func (f *fixture) call(t *testing.T, tool string, args any) *orchestrator.Result {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.reg.Call(context.Background(), f.run, orchestrator.SurfacePlan, tool, raw)
	if err != nil {
		t.Fatalf("%s %s: Go error %v", tool, raw, err)
	}
	return res
}

// ok calls a tool and fails the test unless the result is a success
// containing every want.
func (f *fixture) ok(t *testing.T, tool string, args any, want ...string) string {
	t.Helper()
	res := f.call(t, tool, args)
	if res.IsError {
		t.Fatalf("%s %v: error %s", tool, args, res.FirstText())
	}
	for _, w := range want {
		if !strings.Contains(res.FirstText(), w) {
			t.Fatalf("%s %v: %q lacks %q", tool, args, res.FirstText(), w)
		}
	}
	return res.FirstText()
}

// fails calls a tool and fails the test unless the result is an error
// containing every want.
func (f *fixture) fails(t *testing.T, tool string, args any, want ...string) {
	t.Helper()
	res := f.call(t, tool, args)
	if !res.IsError {
		t.Fatalf("%s %v: want an error, got %s", tool, args, res.FirstText())
	}
	for _, w := range want {
		if !strings.Contains(res.FirstText(), w) {
			t.Fatalf("%s %v: %q lacks %q", tool, args, res.FirstText(), w)
		}
	}
}

type obj = map[string]any

// pid is the process id of the worker's current attempt.
func (f *fixture) pid(t *testing.T, id string) int {
	t.Helper()
	pl := f.prov.pool(f.run)
	w, err := pl.find(id)
	if err != nil {
		t.Fatal(err)
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return w.cur.proc.Pid()
}

// group lists the live (not zombie) processes in process group pgid.
func group(pgid int) []procfs.Process {
	return procfs.Filter(func(p procfs.Process) bool { return p.Live() && p.PGID == pgid })
}

// waitGroupSize waits until process group pgid has n live members. A
// process killed with its group may still be exiting, its pipes already
// closed, for a moment after the kill: "none left" is checked with a
// deadline, not at once.
func waitGroupSize(t *testing.T, pgid, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if len(group(pgid)) == n {
			return
		}
	}
	t.Fatalf("process group %d has %v, want %d live processes", pgid, group(pgid), n)
}

func TestSpawnWaitList(t *testing.T) {
	f := newFixture(t, config(script(t, "echo"), nil))
	f.ok(t, "vibe_list", obj{}, "No workers")
	f.ok(t, "vibe_spawn", obj{"brief": "rename Foo to Bar in pkg/x", "label": "rename"}, "Spawned worker w1", "tier fast", "running")
	out := f.ok(t, "vibe_wait", obj{"worker_id": "w1"}, `Settled: w1 ("rename", tier fast) succeeded after`,
		"Result (stdout):\nrename Foo to Bar in pkg/x\n", "done in "+f.run.Workdir)
	if strings.Contains(out, "cut") {
		t.Fatalf("small result reported as cut: %s", out)
	}
	f.ok(t, "vibe_spawn", obj{"brief": "second", "label": "two", "tier": "fast"}, "Spawned worker w2")
	f.ok(t, "vibe_wait", obj{"worker_id": "w2", "timeout_seconds": 30}, "succeeded")
	f.ok(t, "vibe_list", obj{}, "2 worker(s): 0 running, 2 succeeded",
		`w1  "rename"  fast  succeeded`, "rename Foo to Bar in pkg/x done in",
		`w2  "two"  fast  succeeded`)
	if v := testutil.ToFloat64(f.metrics.SessionsActive.WithLabelValues(metrics.KindWorker, metrics.DriverHost)); v != 2 {
		t.Fatalf("berth_sessions_active{kind=worker} = %v, want 2", v)
	}
}

func TestSendAppendsAndReruns(t *testing.T) {
	f := newFixture(t, config(script(t, "steer"), nil))
	f.ok(t, "vibe_spawn", obj{"brief": "port the parser", "label": "parser"})
	f.ok(t, "vibe_wait", obj{"worker_id": "w1", "timeout_seconds": 1}, "Still running: w1", "vibe_kill")
	first := f.pid(t, "w1")
	waitGroupSize(t, first, 2) // sh and its sleep
	f.ok(t, "vibe_send", obj{"worker_id": "w1", "message": "use the new lexer"},
		"Sent message 1", "its running attempt was stopped")
	waitGroupSize(t, first, 0)
	f.ok(t, "vibe_wait", obj{"worker_id": "w1", "timeout_seconds": 1}, "Still running")
	f.ok(t, "vibe_send", obj{"worker_id": "w1", "message": "then finish"}, "Sent message 2")
	f.ok(t, "vibe_wait", obj{"worker_id": "w1"}, "succeeded",
		"port the parser\n\n--- Follow-up message 1 from the lead agent",
		"use the new lexer\n\n--- Follow-up message 2 from the lead agent",
		"then finish")
	// A settled worker reruns too.
	f.ok(t, "vibe_send", obj{"worker_id": "w1", "message": "finish again"}, "Sent message 3", "it had settled, so it was started again")
	f.ok(t, "vibe_wait", obj{"worker_id": "w1"}, "succeeded", "finish again")
}

func TestWaitFollowsARerun(t *testing.T) {
	f := newFixture(t, config(script(t, "steer"), nil))
	f.ok(t, "vibe_spawn", obj{"brief": "work", "label": "l"})
	var wg sync.WaitGroup
	var waited string
	wg.Go(func() { waited = f.ok(t, "vibe_wait", obj{"worker_id": "w1", "timeout_seconds": 60}) })
	time.Sleep(100 * time.Millisecond) // let the wait begin on the first attempt
	f.ok(t, "vibe_send", obj{"worker_id": "w1", "message": "finish"})
	wg.Wait()
	if !strings.Contains(waited, "succeeded") || !strings.Contains(waited, "finish") {
		t.Fatalf("a wait across a rerun returned %q, want the rerun's result", waited)
	}
}

func TestKill(t *testing.T) {
	f := newFixture(t, config(script(t, "steer"), nil))
	f.ok(t, "vibe_spawn", obj{"brief": "work", "label": "busy"})
	pid := f.pid(t, "w1")
	waitGroupSize(t, pid, 2)
	f.ok(t, "vibe_kill", obj{"worker_id": "w1"}, `Killed w1 ("busy", tier fast)`)
	waitGroupSize(t, pid, 0)
	f.ok(t, "vibe_kill", obj{"worker_id": "w1"}, "w1 was already killed")
	f.ok(t, "vibe_wait", obj{"worker_id": "w1"}, "Settled: w1", "was killed")
	f.fails(t, "vibe_send", obj{"worker_id": "w1", "message": "finish"}, "w1 was killed and cannot be resumed", "vibe_spawn")
	f.ok(t, "vibe_list", obj{}, "1 killed", `w1  "busy"  fast  killed`)
	if v := testutil.ToFloat64(f.metrics.SessionEnds.WithLabelValues(metrics.KindWorker, metrics.ReasonStopped)); v != 1 {
		t.Fatalf("berth_session_ends_total{kind=worker,reason=stopped} = %v, want 1", v)
	}
	if v := testutil.ToFloat64(f.metrics.SessionsActive.WithLabelValues(metrics.KindWorker, metrics.DriverHost)); v != 0 {
		t.Fatalf("berth_sessions_active{kind=worker} = %v, want 0", v)
	}
}

func TestFailure(t *testing.T) {
	f := newFixture(t, config(nil, script(t, "fail")))
	f.ok(t, "vibe_spawn", obj{"brief": "b", "label": "broken", "tier": "good"}, "tier good")
	f.ok(t, "vibe_wait", obj{"worker_id": "w1"}, `w1 ("broken", tier good) failed after`, "exit status 3",
		"stdout:\npartial work", "stderr:\nwarming up\ncompile error: undefined: frobnicate", "vibe_send")
	f.ok(t, "vibe_list", obj{}, "1 failed", "exit status 3: compile error: undefined: frobnicate")
}

func TestOutputIsCapped(t *testing.T) {
	cfg := config(script(t, "flood"), nil)
	cfg.OutputLimit = 1001
	f := newFixture(t, cfg)
	f.ok(t, "vibe_spawn", obj{"brief": "b", "label": "loud"})
	out := f.ok(t, "vibe_wait", obj{"worker_id": "w1"}, "succeeded", "[cut: showing the first 1001 of 100003 bytes]")
	if n := strings.Count(out, "x"); n != 1001 {
		t.Fatalf("kept %d x's, want 1001", n)
	}
	f.ok(t, "vibe_list", obj{}, strings.Repeat("x", listSummary)+"…")
}

func TestRunnerProblems(t *testing.T) {
	f := newFixture(t, config(nil, []string{"/nonexistent/agent", "--print"}))
	f.fails(t, "vibe_spawn", obj{"brief": "b", "label": "l"}, `no runner is configured for tier "fast"`, "vibe.runners.fast")
	f.fails(t, "vibe_spawn", obj{"brief": "b", "label": "l", "tier": "good"}, "could not start the good runner", "/nonexistent/agent", "vibe.runners.good")
	f.fails(t, "vibe_spawn", obj{"brief": "b", "label": "l", "tier": "best"}, "tier")
	f.fails(t, "vibe_spawn", obj{"brief": " ", "label": "l"}, "brief is empty")
	f.fails(t, "vibe_spawn", obj{"brief": "b", "label": ""}, "label is empty")
	f.fails(t, "vibe_spawn", obj{"label": "l"}, "brief")
	f.ok(t, "vibe_list", obj{}, "No workers")
	if v := testutil.ToFloat64(f.metrics.SessionStarts.WithLabelValues(metrics.KindWorker, "error")); v != 1 {
		t.Fatalf("berth_session_starts_total{kind=worker,outcome=error} = %v, want 1", v)
	}
}

func TestBadWorkerArguments(t *testing.T) {
	f := newFixture(t, config(script(t, "echo"), nil))
	f.fails(t, "vibe_wait", obj{"worker_id": "w1"}, `unknown worker "w1": this run has no workers`)
	f.ok(t, "vibe_spawn", obj{"brief": "b", "label": "l"})
	f.fails(t, "vibe_wait", obj{"worker_id": "w7"}, `unknown worker "w7": this run has w1`)
	f.fails(t, "vibe_kill", obj{"worker_id": "w7"}, `unknown worker "w7"`)
	f.fails(t, "vibe_send", obj{"worker_id": "w1", "message": "  "}, "message is empty")
	f.fails(t, "vibe_send", obj{"worker_id": "w1"}, "message")
	f.fails(t, "vibe_wait", obj{"worker_id": "w1", "timeout_seconds": 100000}, "timeout_seconds")
	f.fails(t, "vibe_wait", obj{"worker_id": "w1", "timeout_seconds": 0}, "timeout_seconds")
	f.fails(t, "vibe_list", obj{"all": true}, "all")
}

func TestMaxWorkers(t *testing.T) {
	cfg := config(script(t, "echo"), nil)
	cfg.MaxWorkers = 2
	f := newFixture(t, cfg)
	f.ok(t, "vibe_spawn", obj{"brief": "b", "label": "a"})
	f.ok(t, "vibe_spawn", obj{"brief": "b", "label": "b"})
	f.fails(t, "vibe_spawn", obj{"brief": "b", "label": "c"}, "already has 2 workers", "vibe.max_workers", "vibe_kill")
	f.ok(t, "vibe_kill", obj{"worker_id": "w1"})
	f.ok(t, "vibe_spawn", obj{"brief": "b", "label": "c"}, "Spawned worker w3")
}

func TestRunEndLeavesNoWorkerProcess(t *testing.T) {
	f := newFixture(t, config(script(t, "steer"), script(t, "echo")))
	f.ok(t, "vibe_spawn", obj{"brief": "one", "label": "a"})
	f.ok(t, "vibe_spawn", obj{"brief": "two", "label": "b"})
	f.ok(t, "vibe_spawn", obj{"brief": "three", "label": "c", "tier": "good"})
	f.ok(t, "vibe_wait", obj{"worker_id": "w3"}, "succeeded")
	pids := []int{f.pid(t, "w1"), f.pid(t, "w2")}
	for _, p := range pids {
		waitGroupSize(t, p, 2)
	}
	f.run.End(orchestrator.EndStopped)
	for _, p := range pids {
		waitGroupSize(t, p, 0)
	}
	if v := testutil.ToFloat64(f.metrics.SessionEnds.WithLabelValues(metrics.KindWorker, metrics.ReasonRunEnded)); v != 3 {
		t.Fatalf("berth_session_ends_total{kind=worker,reason=run_ended} = %v, want 3", v)
	}
	if v := testutil.ToFloat64(f.metrics.SessionsActive.WithLabelValues(metrics.KindWorker, metrics.DriverHost)); v != 0 {
		t.Fatalf("berth_sessions_active{kind=worker} = %v, want 0", v)
	}
	res, err := f.reg.Call(context.Background(), f.run, orchestrator.SurfaceFull, "vibe_list", nil)
	if err == nil {
		t.Fatalf("a call on an ended run answered %+v", res)
	}
}

// A run ending while sends and spawns are in flight must still leave no
// process behind, whichever wins each race.
func TestRunEndRacingSendAndSpawn(t *testing.T) {
	for i := range 10 {
		f := newFixture(t, config(script(t, "steer"), nil))
		f.ok(t, "vibe_spawn", obj{"brief": "work", "label": "l"})
		var wg sync.WaitGroup
		for j := range 3 {
			wg.Go(func() {
				raw, _ := json.Marshal(obj{"worker_id": "w1", "message": fmt.Sprint("m", j)})
				_, _ = f.reg.Call(context.Background(), f.run, orchestrator.SurfaceFull, "vibe_send", raw)
			})
			wg.Go(func() {
				_, _ = f.reg.Call(context.Background(), f.run, orchestrator.SurfaceFull, "vibe_spawn", json.RawMessage(`{"brief":"x","label":"y"}`))
			})
		}
		time.Sleep(time.Duration(i) * 5 * time.Millisecond)
		f.run.End(orchestrator.EndStopped)
		wg.Wait()
		pl := f.prov.pool(f.run)
		pl.mu.Lock()
		var leaders []int
		for _, w := range pl.workers {
			if w.cur.proc != nil && w.cur.proc.Pid() != 0 { // 0: its relay ended before starting it
				leaders = append(leaders, w.cur.proc.Pid())
			}
			if w.status != statusKilled {
				t.Errorf("round %d: %s is %s after the run ended", i, w.id, w.status)
			}
		}
		pl.mu.Unlock()
		for _, p := range leaders {
			waitGroupSize(t, p, 0)
		}
		if v := testutil.ToFloat64(f.metrics.SessionsActive.WithLabelValues(metrics.KindWorker, metrics.DriverHost)); v != 0 {
			t.Fatalf("round %d: berth_sessions_active{kind=worker} = %v, want 0", i, v)
		}
	}
}

func TestVibeFeatureGatesTheTools(t *testing.T) {
	f := newFixture(t, config(script(t, "echo"), nil))
	names := func() string {
		var n []string
		for _, s := range f.reg.List(f.run, orchestrator.SurfaceReadonly) {
			if s.Tier != orchestrator.Read || !s.ParallelSafe {
				t.Errorf("%s: tier %s, parallelSafe %v", s.Name, s.Tier, s.ParallelSafe)
			}
			n = append(n, s.Name)
		}
		return strings.Join(n, ",")
	}
	if got := names(); got != "vibe_kill,vibe_list,vibe_send,vibe_spawn,vibe_wait" {
		t.Fatalf("vibe on lists %q", got)
	}
	f.run.SetFeatures(map[string]bool{orchestrator.FeatureVibe: false})
	if got := names(); got != "" {
		t.Fatalf("vibe off lists %q", got)
	}
	f.fails(t, "vibe_list", obj{}, `feature "vibe" is off`)
}

func TestConfigCheck(t *testing.T) {
	if err := DefaultConfig().check(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"max workers", func(c *Config) { c.MaxWorkers = 0 }, "vibe.max_workers"},
		{"output limit", func(c *Config) { c.OutputLimit = 0 }, "vibe.output_limit"},
		{"stderr limit", func(c *Config) { c.StderrLimit = -1 }, "vibe.stderr_limit"},
		{"wait max", func(c *Config) { c.WaitMax = 0 }, "vibe.wait_max"},
		{"wait default above max", func(c *Config) { c.WaitDefault = time.Hour }, "vibe.wait_default"},
		{"empty executable", func(c *Config) { c.Runners.Good = []string{"", "-x"} }, "vibe.runners.good"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			if _, err := New(c, metrics.NewForTest()); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// A process that leaves the worker's process group keeps its stdout open.
// Under the relay it dies when the worker exits (issue 13 item 3); without
// one (no relay installed) it outlives the worker, which must still settle
// (and the run still end) once the group is gone.
func TestEscapedProcessDoesNotHoldTheWorker(t *testing.T) {
	marker := strconv.Itoa(500000 + os.Getpid()%100000)
	t.Cleanup(func() {
		for _, p := range escaped(marker) {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
	})
	t.Run("under the relay", func(t *testing.T) {
		f := newFixture(t, config(append(script(t, "escape"), marker), nil))
		f.ok(t, "vibe_spawn", obj{"brief": "b", "label": "l"})
		f.ok(t, "vibe_wait", obj{"worker_id": "w1", "timeout_seconds": 30}, "succeeded", "started")
		for deadline := time.Now().Add(5 * time.Second); len(escaped(marker)) > 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the escaped process outlived its worker: %v", escaped(marker))
			}
		}
		f.run.End(orchestrator.EndStopped)
	})
	t.Run("without the relay", func(t *testing.T) {
		noRelay := func(string) enclosure.Enclosure {
			return host.NewWith(host.Options{
				Relay: func() (*relay.Binary, error) { return nil, errors.New("no relay in this test") },
				Log:   slog.New(slog.DiscardHandler),
			})
		}
		f := newFixtureIn(t, config(append(script(t, "escape"), marker), nil), noRelay)
		f.ok(t, "vibe_spawn", obj{"brief": "b", "label": "l"})
		f.ok(t, "vibe_wait", obj{"worker_id": "w1", "timeout_seconds": 30}, "succeeded", "started")
		if len(escaped(marker)) == 0 {
			t.Fatal("the escaped process is not running: the test shows nothing")
		}
		f.run.End(orchestrator.EndStopped)
	})
}

// escaped lists the processes running "sleep marker".
func escaped(marker string) []procfs.Process {
	return procfs.Filter(func(p procfs.Process) bool { return p.Cmdline() == "sleep "+marker })
}

// Every attempt's pipes are closed once it settles: many workers and
// reruns leave the descriptor count where it was.
func TestPipesAreClosed(t *testing.T) {
	f := newFixture(t, config(script(t, "echo"), nil))
	fds := func() int {
		entries, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(entries)
	}
	f.ok(t, "vibe_spawn", obj{"brief": "warm up", "label": "l"})
	f.ok(t, "vibe_wait", obj{"worker_id": "w1"}, "succeeded")
	before := fds()
	for i := range 20 {
		id := fmt.Sprint("w", i+2)
		f.ok(t, "vibe_spawn", obj{"brief": "b", "label": "l"}, "Spawned worker "+id)
		f.ok(t, "vibe_send", obj{"worker_id": id, "message": "again"})
		f.ok(t, "vibe_wait", obj{"worker_id": id}, "succeeded")
		f.ok(t, "vibe_kill", obj{"worker_id": id})
	}
	if after := fds(); after > before {
		t.Fatalf("open descriptors went from %d to %d over 40 attempts", before, after)
	}
}

// A worker is told the surface it was started from, in BERTH_SURFACE and
// wherever {surface} is in its runner's argv, so that its own tools can
// keep a plan or readonly worker from writing. A rerun is told the
// surface of the vibe_send that started it.
//
// Issue 11 item 14.
func TestWorkersLearnTheirSurface(t *testing.T) {
	f := newFixture(t, config([]string{"/bin/sh", "-c", `echo "env=$BERTH_SURFACE arg=$1 flag=$2"`, "sh", "{surface}", "--mode={surface}"}, nil))
	callOn := func(s orchestrator.Surface, tool string, args any) string {
		t.Helper()
		raw, _ := json.Marshal(args)
		res, err := f.reg.Call(context.Background(), f.run, s, tool, raw)
		if err != nil || res.IsError {
			t.Fatalf("%s on %s: %v %s", tool, s, err, res.FirstText())
		}
		return res.FirstText()
	}
	for i, s := range []orchestrator.Surface{orchestrator.SurfacePlan, orchestrator.SurfaceReadonly, orchestrator.SurfaceFull} {
		id := fmt.Sprintf("w%d", i+1)
		callOn(s, "vibe_spawn", obj{"brief": "look around", "label": string(s)})
		want := fmt.Sprintf("env=%s arg=%s flag=--mode=%s\n", s, s, s)
		if got := callOn(s, "vibe_wait", obj{"worker_id": id}); !strings.Contains(got, want) {
			t.Fatalf("a worker spawned from %s printed:\n%s\nwant %q", s, got, want)
		}
	}
	// The full agent's worker w3, sent a message from plan, reruns as plan.
	callOn(orchestrator.SurfacePlan, "vibe_send", obj{"worker_id": "w3", "message": "only read"})
	if got := callOn(orchestrator.SurfaceFull, "vibe_wait", obj{"worker_id": "w3"}); !strings.Contains(got, "env=plan arg=plan") {
		t.Fatalf("a rerun sent from plan printed:\n%s", got)
	}
}

// Workers end with the Berth that runs them: in the run resumed after
// Berth restarted, vibe_* of a worker from before the restart says it
// is gone because Berth restarted, and to spawn a new one; workers
// spawned since have ids of their own, which no earlier id names.
//
// Issue 29 item 3 (vibe workers).
func TestWorkerFromBeforeARestartIsDeclaredLost(t *testing.T) {
	f := newFixture(t, config(script(t, "steer"), nil))
	f.ok(t, "vibe_spawn", obj{"brief": "b", "label": "l"}, "w1")
	f.run.End("Berth was killed")
	// The same run, resumed by the Berth that came next.
	resumed := orchestrator.NewRun("r1", "c1", f.run.Workdir, host.New(), nil, map[string]bool{orchestrator.FeatureVibe: true})
	resumed.Resumed = true
	t.Cleanup(func() { resumed.End("test") })
	f.run = resumed
	gone := `worker "w1" is gone: Berth restarted since it was spawned, and workers end with the Berth that runs them (its process, its output and its slot are lost); spawn a new worker with vibe_spawn to do its work`
	for _, tool := range []string{"vibe_wait", "vibe_kill"} {
		f.fails(t, tool, obj{"worker_id": "w1"}, gone)
	}
	f.fails(t, "vibe_send", obj{"worker_id": "w1", "message": "go on"}, gone)
	spawned := f.ok(t, "vibe_spawn", obj{"brief": "b", "label": "l"})
	id := regexp.MustCompile(`w[0-9a-f]{4}_1`).FindString(spawned)
	if id == "" {
		t.Fatalf("a worker spawned after the restart: %s", spawned)
	}
	f.fails(t, "vibe_wait", obj{"worker_id": "w1"}, gone+"; the workers spawned since the restart are "+id)
	f.ok(t, "vibe_kill", obj{"worker_id": id})
}
