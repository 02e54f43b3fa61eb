package lsp

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/internal/procfs"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

// next is another run on f's workdir, enclosure and provider: the next
// run of a conversation (or of another one) in the same checkout.
func (f *fixture) next(t *testing.T, runID string) *fixture {
	t.Helper()
	run := orchestrator.NewRun(runID, "conv", f.dir, f.run.Enclosure, nil, nil)
	t.Cleanup(func() { run.End(orchestrator.EndStopped) })
	return &fixture{dir: f.dir, run: run, reg: f.reg, p: f.p}
}

// end ends f's run and checks what it leaves: exactly the servers the
// provider reports parked, and nothing once the provider has shut down
// as Berth does when it stops.
func (f *fixture) end(t *testing.T) {
	t.Helper()
	f.run.End(orchestrator.EndStopped)
	onlyParkedIn(t, f.p, f.dir)
	f.p.Shutdown()
	noProcessesIn(t, f.dir)
}

// parkedPids are the pids of the servers p reports parked on the host.
func parkedPids(p *Provider) []int {
	var out []int
	for _, ps := range p.pool.list("host", "local") {
		if pid, err := strconv.Atoi(strings.TrimPrefix(ps.process, "pid ")); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// onlyParkedIn fails the test unless the processes left in dir are the
// servers p reports parked, with the relay each runs under and what each
// started, and every one of those is alive.
func onlyParkedIn(t *testing.T, p *Provider, dir string) {
	t.Helper()
	parked := parkedPids(p)
	for _, pid := range parked {
		if !procfs.Alive(pid) {
			t.Errorf("parked server %d is not running", pid)
		}
	}
	ours := func(pr procfs.Process) bool {
		for _, pid := range parked {
			if pr.PID == pid || slices.Contains(procfs.Descendants(pid), pr.PID) {
				return true
			}
			if srv, ok := procfs.Read(pid); ok && srv.PPID == pr.PID {
				return true // its relay
			}
		}
		return false
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var stray []procfs.Process
		for _, pr := range procfs.In(dir) {
			if pr.Live() && !ours(pr) {
				stray = append(stray, pr)
			}
		}
		if len(stray) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("processes left in %s that are not parked servers (%v): %v", filepath.Base(dir), parked, procfs.Strings(stray))
			return
		}
	}
}

// pidIn reads the pid a status line gives the server named.
func pidIn(t *testing.T, status, name string) int {
	t.Helper()
	m := regexp.MustCompile(regexp.QuoteMeta(name) + ` for root [^\n]*?pid (\d+)`).FindStringSubmatch(status)
	if m == nil {
		t.Fatalf("no pid of %s in status:\n%s", name, status)
	}
	pid, _ := strconv.Atoi(m[1])
	return pid
}

// processesNamed are the live processes in dir whose command line has
// name as its program's base name.
func processesNamed(dir, name string) []int {
	var out []int
	for _, pr := range procfs.In(dir) {
		if f := strings.Fields(pr.Cmdline()); pr.Live() && len(f) > 0 && filepath.Base(f[0]) == name {
			out = append(out, pr.PID)
		}
	}
	return out
}

var goplsRefs = map[string]any{"action": "references", "file": "greet/greet.go", "line": 6, "symbol": "Greet"}

// timed calls lsp and returns its text and how long it took.
func (f *fixture) timed(t *testing.T, a map[string]any) (string, time.Duration) {
	t.Helper()
	start := time.Now()
	text := f.ok(t, a)
	return text, time.Since(start)
}

// TestTheNextRunAdoptsTheParkedGopls: a run's gopls is parked when the
// run ends (its documents closed; the only process left), and the next
// run on the same workdir and root gets that very process: its first
// references are answered by it with no gopls started, status says it
// was adopted, and its diagnostics registry starts empty. The first
// references of each run are logged, cold and adopted.
//
// Issue 28 item 2.
func TestTheNextRunAdoptsTheParkedGopls(t *testing.T) {
	f := newFixture(t, "go", DefaultConfig())
	refs, cold := f.timed(t, goplsRefs)
	contains(t, refs, "main.go:11")
	_, warm := f.timed(t, goplsRefs)
	status := f.ok(t, map[string]any{"action": "status"})
	contains(t, status, "gopls for root .: ready, started cold at the first call")
	pid := pidIn(t, status, "gopls")
	if rep := f.write(t, "main.go", f.read(t, "main.go")+"\nvar broken int = \"x\"\n"); rep.State != orchestrator.WriteIssues {
		t.Fatalf("a broken write: %s %s", rep.State, rep.Text)
	}
	f.run.End(orchestrator.EndStopped)

	onlyParkedIn(t, f.p, f.dir)
	if got := parkedPids(f.p); !slices.Equal(got, []int{pid}) {
		t.Fatalf("parked after the run: %v, want [%d]", got, pid)
	}
	ps := f.p.pool.parked[0]
	if open := ps.srv.docs.paths(""); len(open) != 0 {
		t.Errorf("the parked server still has open documents: %v", open)
	}

	// While it is parked, the agent adds a file that uses Hello: the
	// adopting run is told, so its answers have it.
	if err := os.WriteFile(filepath.Join(f.dir, "greet", "extra.go"), []byte("package greet\n\nfunc Extra() string { return Hello(\"x\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := f.next(t, "run-go-2")
	before := processesNamed(g.dir, "gopls")
	refs, adopted := g.timed(t, goplsRefs)
	contains(t, refs, "main.go:11")
	contains(t, g.ok(t, map[string]any{"action": "references", "file": "greet/greet.go", "line": 21, "symbol": "func Hello"}), "greet/extra.go:3:")
	if after := processesNamed(g.dir, "gopls"); !slices.Equal(after, before) || !slices.Equal(after, []int{pid}) {
		t.Errorf("gopls processes before the second run's first call %v, after %v: want [%d] both times", before, after, pid)
	}
	status = g.ok(t, map[string]any{"action": "status"})
	contains(t, status, "gopls for root .: ready, adopted at the first call about one of its files: parked ", "Parked on this enclosure (0)")
	if got := pidIn(t, status, "gopls"); got != pid {
		t.Errorf("the second run's gopls is pid %d, want the parked %d", got, pid)
	}
	// Its registry is its own, empty: the first run's record of the
	// error it was told of stayed with the first run.
	if !f.p.state(f.run).reg.has("main.go") {
		t.Error("the first run has no record of the error it was told of")
	}
	if n := len(g.p.state(g.run).reg.known); n != 0 {
		t.Errorf("the adopting run's registry has %d file(s), want none", n)
	}
	for how, want := range map[string]float64{metrics.LSPCold: 1, metrics.LSPAdopted: 1} {
		if n := testutil.ToFloat64(f.p.metrics.LSPServerStarts.WithLabelValues("gopls", how)); n != want {
			t.Errorf("gopls starts %s: %v, want %v", how, n, want)
		}
	}
	t.Logf("first references: cold %s, adopted %s; a warm call %s", cold.Round(time.Millisecond), adopted.Round(time.Millisecond), warm.Round(time.Millisecond))
	g.end(t)
}

// TestConcurrentRunsOnOneRootOwnTheirServers: two runs live at once on
// one root each have a gopls of their own, and a parked server is
// adopted by one run only: of two runs that start together, one adopts
// it and the other starts its own.
//
// Issue 28 item 2.
func TestConcurrentRunsOnOneRootOwnTheirServers(t *testing.T) {
	f := newFixture(t, "go", DefaultConfig())
	f.ok(t, goplsRefs)
	parked := pidIn(t, f.ok(t, map[string]any{"action": "status"}), "gopls")
	f.run.End(orchestrator.EndStopped)

	a, b := f.next(t, "run-a"), f.next(t, "run-b")
	var wg sync.WaitGroup
	for _, x := range []*fixture{a, b} {
		wg.Go(func() { x.ok(t, goplsRefs) })
	}
	wg.Wait()
	pa := pidIn(t, a.ok(t, map[string]any{"action": "status"}), "gopls")
	pb := pidIn(t, b.ok(t, map[string]any{"action": "status"}), "gopls")
	if pa == pb {
		t.Fatalf("two live runs share gopls %d", pa)
	}
	if (pa == parked) == (pb == parked) {
		t.Errorf("the parked gopls %d: run a got %d, run b %d; want exactly one to adopt it", parked, pa, pb)
	}
	if n := testutil.ToFloat64(f.p.metrics.LSPServerStarts.WithLabelValues("gopls", metrics.LSPAdopted)); n != 1 {
		t.Errorf("adoptions: %v, want 1", n)
	}
	a.run.End(orchestrator.EndStopped)
	b.run.End(orchestrator.EndStopped)
	if got := parkedPids(f.p); len(got) != 2 || !slices.Contains(got, pa) || !slices.Contains(got, pb) {
		t.Errorf("parked after both ended: %v, want %d and %d", got, pa, pb)
	}
	onlyParkedIn(t, f.p, f.dir)
	f.p.Shutdown()
	noProcessesIn(t, f.dir)
}

// pylspProject lays out a Python project of one module in a fresh
// directory.
func pylspProject(t *testing.T) string {
	t.Helper()
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	for name, body := range map[string]string{"pyproject.toml": "[project]\nname = \"p\"\n", "m.py": "def twice(x):\n    return 2 * x\n\nprint(twice(3))\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// pylspConfig serves Python with pylsp alone (pyright hidden by the
// catalog), parking as conf says.
func pylspConfig(keepWarm time.Duration) Config {
	conf := DefaultConfig()
	conf.Servers = slices.DeleteFunc(DefaultServers(), func(s ServerConfig) bool { return s.Name != "pylsp" })
	conf.KeepWarm = keepWarm
	return conf
}

var pyHover = map[string]any{"action": "hover", "file": "m.py", "line": 4, "symbol": "twice"}

// TestAParkedServerEndsAtItsDeadline: a parked pylsp ends once
// lsp.keep_warm has passed since its run ended, not before, counted as
// expired, and leaves nothing behind. How soon after its deadline is a
// target, measured by bench/parking (within a second; 646 ms at worst of
// 13 there): here the bound is only that it ends, since a loaded machine
// (the CI run of 83d0978: 3.06 s for a 2 s keep) stretches its polite
// shutdown.
//
// Issue 28 item 2.
func TestAParkedServerEndsAtItsDeadline(t *testing.T) {
	const keep = 2 * time.Second
	f := newFixtureIn(t, pylspProject(t), "run-py", pylspConfig(keep))
	f.ok(t, pyHover)
	pid := pidIn(t, f.ok(t, map[string]any{"action": "status"}), "pylsp")
	f.run.End(orchestrator.EndStopped)
	parkedAt := time.Now()
	onlyParkedIn(t, f.p, f.dir)
	for procfs.Alive(pid) && time.Since(parkedAt) < keep+30*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	gone := time.Since(parkedAt)
	t.Logf("the parked pylsp ended %s after its run (lsp.keep_warm %s)", gone.Round(time.Millisecond), keep)
	switch {
	case procfs.Alive(pid):
		t.Errorf("the parked pylsp still runs %s after its run; lsp.keep_warm is %s", gone.Round(time.Millisecond), keep)
	case gone < keep:
		t.Errorf("the parked pylsp ended %s after its run, before lsp.keep_warm (%s)", gone.Round(time.Millisecond), keep)
	}
	noProcessesIn(t, f.dir)
	if n := testutil.ToFloat64(f.p.metrics.LSPParkedEnds.WithLabelValues(metrics.ParkedExpired)); n != 1 {
		t.Errorf("parked ends (expired): %v, want 1", n)
	}
	if n := testutil.ToFloat64(f.p.metrics.LSPParked.WithLabelValues(metrics.DriverHost)); n != 0 {
		t.Errorf("parked servers after the deadline: %v", n)
	}
}

// TestParkedServersAreCapped: past lsp.max_parked_per_enclosure, and past
// lsp.max_parked_rss_bytes, the oldest parked servers end first; what
// stays parked is exactly what status reports.
//
// Issue 28 item 2.
func TestParkedServersAreCapped(t *testing.T) {
	conf := pylspConfig(time.Minute)
	conf.MaxParkedPerEnclosure = 2
	p, err := New(conf, metrics.NewForTest())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Shutdown)
	// Each project is a workdir of its own: one parked pylsp each.
	var pids []int
	var dirs []string
	park := func(i int) {
		t.Helper()
		dir := pylspProject(t)
		f := fixtureOf(t, p, dir, "run-cap-"+strconv.Itoa(i))
		f.ok(t, pyHover)
		pids = append(pids, pidIn(t, f.ok(t, map[string]any{"action": "status"}), "pylsp"))
		dirs = append(dirs, dir)
		f.run.End(orchestrator.EndStopped)
	}
	for i := range 3 {
		park(i)
	}
	waitGone(t, pids[0], "the oldest parked server, past lsp.max_parked_per_enclosure")
	if got := parkedPids(p); !slices.Equal(got, pids[1:]) {
		t.Errorf("parked: %v, want the two newest %v", got, pids[1:])
	}
	if n := testutil.ToFloat64(p.metrics.LSPParkedEnds.WithLabelValues(metrics.ParkedCapped)); n != 1 {
		t.Errorf("parked ends (capped): %v, want 1", n)
	}

	// Memory: a cap of one and a half servers' worth keeps only the
	// newest.
	var rss int64
	for deadline := time.Now().Add(10 * time.Second); rss == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, ps := range p.pool.list("host", "local") {
			rss = max(rss, ps.rss)
		}
	}
	if rss == 0 {
		t.Fatal("no parked server's memory was read")
	}
	p.pool.mu.Lock()
	p.pool.conf.MaxParkedRSSBytes = rss * 3 / 2
	p.pool.conf.MaxParkedPerEnclosure = 10 // memory alone decides
	p.pool.mu.Unlock()
	park(3)
	for _, pid := range pids[1:3] {
		waitGone(t, pid, "a parked server past lsp.max_parked_rss_bytes")
	}
	if got := parkedPids(p); !slices.Equal(got, pids[3:]) {
		t.Errorf("parked: %v, want the newest alone %v", got, pids[3:])
	}
	if n := testutil.ToFloat64(p.metrics.LSPParkedEnds.WithLabelValues(metrics.ParkedMemory)); n != 2 {
		t.Errorf("parked ends (memory): %v, want 2", n)
	}
	for _, dir := range dirs[:3] {
		noProcessesIn(t, dir)
	}
	onlyParkedIn(t, p, dirs[3])
	p.Shutdown()
	noProcessesIn(t, dirs[3])
}

// fixtureOf is a run in dir on the host with the provider p.
func fixtureOf(t *testing.T, p *Provider, dir, runID string) *fixture {
	t.Helper()
	reg := orchestrator.NewRegistry(p.metrics, 0)
	reg.Add(p)
	reg.SetWriteObserver(p)
	run := orchestrator.NewRun(runID, "conv", dir, host.New(), nil, nil)
	t.Cleanup(func() { run.End(orchestrator.EndStopped) })
	return &fixture{dir: dir, run: run, reg: reg, p: p}
}

// waitGone fails the test unless pid ends within 10 s.
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); procfs.Alive(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) is still running", what, pid)
		}
	}
}

// TestOnlyAHealthyServerIsParked: a server that crashed in the run (and
// was restarted), one the run reloaded, and one that said it is in error
// end with their run; a parked server whose process ends is dropped from
// the pool as exited.
//
// Issue 28 item 2.
func TestOnlyAHealthyServerIsParked(t *testing.T) {
	cases := []struct {
		name  string
		args  func(t *testing.T) []string
		drive func(t *testing.T, f *fixture)
	}{
		{"crashed", func(t *testing.T) []string {
			return []string{"-mode", "crash-on-hover", "-once", filepath.Join(t.TempDir(), "crashed")}
		}, func(t *testing.T, f *fixture) { f.ok(t, fakeHover) }},
		{"reloaded", func(*testing.T) []string { return nil }, func(t *testing.T, f *fixture) {
			f.ok(t, fakeHover)
			f.ok(t, map[string]any{"action": "reload"})
		}},
		{"misconfigured", func(*testing.T) []string { return []string{"-mode", "complain"} }, func(t *testing.T, f *fixture) {
			f.ok(t, fakeHover)
			for deadline := time.Now().Add(10 * time.Second); !strings.Contains(f.ok(t, map[string]any{"action": "status"}), "complaining on purpose"); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the server's complaint never reached status")
				}
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, "fake", fakeConfig(c.args(t)...))
			c.drive(t, f)
			pid := pidIn(t, f.ok(t, map[string]any{"action": "status"}), "fakelsp")
			f.run.End(orchestrator.EndStopped)
			if got := parkedPids(f.p); len(got) != 0 {
				t.Errorf("parked: %v, want none", got)
			}
			waitGone(t, pid, "the server, at its run's end")
			noProcessesIn(t, f.dir)
		})
	}
	t.Run("exited while parked", func(t *testing.T) {
		f := newFixture(t, "fake", fakeConfig())
		f.ok(t, fakeHover)
		pid := pidIn(t, f.ok(t, map[string]any{"action": "status"}), "fakelsp")
		f.run.End(orchestrator.EndStopped)
		if got := parkedPids(f.p); !slices.Equal(got, []int{pid}) {
			t.Fatalf("parked: %v, want [%d]", got, pid)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); len(parkedPids(f.p)) > 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("a parked server that died is still in the pool")
			}
		}
		if n := testutil.ToFloat64(f.p.metrics.LSPParkedEnds.WithLabelValues(metrics.ParkedExited)); n != 1 {
			t.Errorf("parked ends (exited): %v, want 1", n)
		}
		noProcessesIn(t, f.dir)
		g := f.next(t, "run-after")
		contains(t, g.ok(t, fakeHover), "fake hover from pid")
		contains(t, g.ok(t, map[string]any{"action": "status"}), "started cold at the first call")
	})
}

// TestShutdownEndsEveryParkedServer: Berth's stop ends the parked
// servers, and parks nothing more.
//
// Issue 28 item 2.
func TestShutdownEndsEveryParkedServer(t *testing.T) {
	f := newFixture(t, "fake", fakeConfig())
	f.ok(t, fakeHover)
	f.run.End(orchestrator.EndStopped)
	if len(parkedPids(f.p)) != 1 {
		t.Fatalf("parked: %v", parkedPids(f.p))
	}
	f.p.Shutdown()
	noProcessesIn(t, f.dir)
	if n := testutil.ToFloat64(f.p.metrics.LSPParkedEnds.WithLabelValues(metrics.ParkedShutdown)); n != 1 {
		t.Errorf("parked ends (shutdown): %v, want 1", n)
	}
	g := f.next(t, "run-late")
	g.ok(t, fakeHover)
	g.run.End(orchestrator.EndStopped)
	if got := parkedPids(f.p); len(got) != 0 {
		t.Errorf("parked after shutdown: %v", got)
	}
	noProcessesIn(t, f.dir)
}

// TestAPrewarmThatAdoptsAServerReopensWhatTheEarlierRunHadOpen: a run
// whose prewarm adopts the parked gopls reopens, before any call, the
// documents the run that parked it used, the most recent first, up to
// lsp.reopen_max, skipping one deleted meanwhile; status and the metric
// say how many. The next parking keeps what that run used first, then
// what it reopened; a run that adopts the server at a call reopens
// nothing and keeps the list. A reopen for a run that has ended (its
// server parked again) opens nothing. The prewarm then warms up the
// adopted server about what it reopened.
//
// Issue 28 item 2 (the first call of the next run as fast as a warm one).
func TestAPrewarmThatAdoptsAServerReopensWhatTheEarlierRunHadOpen(t *testing.T) {
	conf := DefaultConfig()
	conf.ReopenMax = 2
	f := newFixture(t, "go", conf)
	mainGo, greetGo := filepath.Join(f.dir, "main.go"), filepath.Join(f.dir, "greet", "greet.go")
	scratch := filepath.Join(f.dir, "greet", "scratch.go")
	if err := os.WriteFile(scratch, []byte("package greet\n\nfunc Scratch() string { return Hello(\"s\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Used in this order: greet.go, scratch.go, main.go (each call also
	// syncs the others again, which is no use of them).
	f.ok(t, goplsRefs)
	f.ok(t, map[string]any{"action": "symbols", "file": "greet/scratch.go"})
	f.ok(t, map[string]any{"action": "symbols", "file": "main.go"})
	pid := pidIn(t, f.ok(t, map[string]any{"action": "status"}), "gopls")
	f.run.End(orchestrator.EndStopped)
	onlyParkedIn(t, f.p, f.dir)
	srv := f.p.pool.parked[0].srv
	if got, _ := srv.reopenList(); !slices.Equal(got, []string{mainGo, scratch}) {
		t.Fatalf("to reopen after the first run: %v, want main.go and scratch.go (the two used last)", got)
	}
	if err := os.Remove(scratch); err != nil { // deleted while parked
		t.Fatal(err)
	}

	g := f.next(t, "run-go-2")
	g.reg.RunStarted(g.run)
	status := g.waitStatus(t, "1 document(s) the earlier run had open reopened")
	contains(t, status, "gopls for root .: ready, adopted at run/start (prewarm)")
	if got := pidIn(t, status, "gopls"); got != pid {
		t.Errorf("the second run's gopls is pid %d, want the parked %d", got, pid)
	}
	if open := srv.docs.paths(""); !slices.Equal(open, []string{mainGo}) {
		t.Errorf("open before any call of the second run: %v, want main.go alone (scratch.go deleted)", open)
	}
	if n := testutil.ToFloat64(f.p.metrics.LSPReopened.WithLabelValues("gopls")); n != 1 {
		t.Errorf("berth_lsp_reopened_documents_total{server=gopls} is %v, want 1", n)
	}
	// Then the warm-up, about each reopened document: a reopened one is
	// analysed anew at its first query. It stays open: the reopen's.
	g.waitStatus(t, "warmed up (references in main.go, ")
	if n := testutil.ToFloat64(f.p.metrics.LSPWarmUps.WithLabelValues("gopls")); n != 1 {
		t.Errorf("berth_lsp_warm_ups_total{server=gopls} is %v after the adopting run's warm-up, want 1", n)
	}
	if open := srv.docs.paths(""); !slices.Equal(open, []string{mainGo}) {
		t.Errorf("open after the warm-up: %v, want main.go, reopened", open)
	}
	time.Sleep(time.Second) // the agent thinks
	refs, first := g.timed(t, map[string]any{"action": "references", "file": "main.go", "line": 11, "symbol": "Greet"})
	contains(t, refs, "main.go:11")
	_, warm := g.timed(t, map[string]any{"action": "references", "file": "main.go", "line": 11, "symbol": "Greet"})
	t.Logf("the adopting run's first references on a reopened file %s; a warm call %s", first.Round(time.Millisecond), warm.Round(time.Millisecond))
	g.ok(t, goplsRefs) // greet.go: used by this run, after main.go
	_, epoch := srv.reopenList()
	g.run.End(orchestrator.EndStopped)
	if got, _ := srv.reopenList(); !slices.Equal(got, []string{greetGo, mainGo}) {
		t.Errorf("to reopen after the second run: %v, want greet.go (used last), then main.go", got)
	}
	// A reopen still under way for the run that ended stops.
	if opened := srv.reopen(t.Context(), []string{mainGo}, epoch); len(opened) != 0 {
		t.Errorf("a reopen for a run that ended opened %v", opened)
	}
	if open := srv.docs.paths(""); len(open) != 0 {
		t.Errorf("the parked server has open documents: %v", open)
	}

	// Adopted at a call: nothing reopened, the list kept.
	h := f.next(t, "run-go-3")
	h.ok(t, map[string]any{"action": "symbols", "file": "main.go"})
	status = h.ok(t, map[string]any{"action": "status"})
	contains(t, status, "gopls for root .: ready, adopted at the first call")
	if strings.Contains(status, "reopened") {
		t.Errorf("an adoption at a call reopened documents:\n%s", status)
	}
	if open := srv.docs.paths(""); !slices.Equal(open, []string{mainGo}) {
		t.Errorf("open in a run that adopted at a call: %v, want main.go (its call's) alone", open)
	}
	h.run.End(orchestrator.EndStopped)
	if got, _ := srv.reopenList(); !slices.Equal(got, []string{mainGo, greetGo}) {
		t.Errorf("to reopen after the third run: %v, want main.go (used), then greet.go (inherited)", got)
	}
	onlyParkedIn(t, f.p, f.dir)
	f.p.Shutdown()
	noProcessesIn(t, f.dir)
}

// An adopted server is warmed up about each document it reopened, the
// most recently used first, and status names how many and the first.
//
// Issue 28 (from review: the warm-up asked about every open document,
// and only one was ever checked).
func TestAnAdoptedServerIsWarmedUpAboutWhatItReopenedMostRecentFirst(t *testing.T) {
	f := newFixture(t, "go", DefaultConfig())
	f.ok(t, goplsRefs) // greet/greet.go
	f.ok(t, map[string]any{"action": "symbols", "file": "main.go"})
	f.run.End(orchestrator.EndStopped)
	onlyParkedIn(t, f.p, f.dir)

	g := f.next(t, "run-go-2")
	g.reg.RunStarted(g.run)
	g.waitStatus(t, "2 document(s) the earlier run had open reopened, warmed up (references in 2 reopened documents, main.go first, ")
	if n := testutil.ToFloat64(f.p.metrics.LSPWarmUps.WithLabelValues("gopls")); n != 2 {
		t.Errorf("berth_lsp_warm_ups_total{server=gopls} is %v, want 2 (one a reopened document)", n)
	}
	g.run.End(orchestrator.EndStopped)
	f.p.Shutdown()
	noProcessesIn(t, f.dir)
}
