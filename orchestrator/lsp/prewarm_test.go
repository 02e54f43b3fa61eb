package lsp

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/orchestrator"
)

// prewarmProject is the go testdata project with a Python project in
// py/: two roots, gopls's at the workdir and pylsp's below it.
func prewarmProject(t *testing.T) string {
	t.Helper()
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	copyTree(t, filepath.Join("testdata", "go"), dir)
	py := filepath.Join(dir, "py")
	if err := os.Mkdir(py, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"pyproject.toml": "[project]\nname = \"p\"\n", "m.py": "def twice(x):\n    return 2 * x\n"} {
		if err := os.WriteFile(filepath.Join(py, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// started lists, as "name root", the servers the fixture's run has.
func (f *fixture) started() []string {
	var out []string
	for _, sl := range f.p.state(f.run).sv.snapshot() {
		out = append(out, sl.key.name+" "+filepath.Base(sl.key.root))
	}
	return out
}

// waitStatus polls status until it holds every want, for up to a minute.
func (f *fixture) waitStatus(t *testing.T, want ...string) string {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		st := f.ok(t, map[string]any{"action": "status"})
		missing := slices.DeleteFunc(slices.Clone(want), func(w string) bool { return strings.Contains(st, w) })
		if len(missing) == 0 {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never said %q:\n%s", missing, st)
		}
	}
}

// TestRunStartPrewarmsTheWorkdirsServers: run/start answers at once and
// starts, in the background, the server a call would get for each root
// found in the workdir (pylsp where pyright is missing); status shows
// each starting, loading, then ready, and the first call is answered by
// the server prewarm started.
//
// Issue 28 item 1.
func TestRunStartPrewarmsTheWorkdirsServers(t *testing.T) {
	f := newFixtureIn(t, prewarmProject(t), "run-prewarm", DefaultConfig(), "pyright-langserver")
	start := time.Now()
	f.reg.RunStarted(f.run)
	if d := time.Since(start); d > 200*time.Millisecond {
		t.Errorf("RunStarted took %s: it must return at once", d)
	}
	// Each status line of gopls is one of the three states, the last one
	// ready.
	var seen []string
	stateRe := regexp.MustCompile(`gopls for root \.: (\w+)`)
	for deadline := time.Now().Add(time.Minute); !slices.Contains(seen, "ready"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gopls was never ready; its states: %v", seen)
		}
		if m := stateRe.FindStringSubmatch(f.ok(t, map[string]any{"action": "status"})); m != nil && !slices.Contains(seen, m[1]) {
			seen = append(seen, m[1])
		}
	}
	for _, s := range seen {
		if s != "starting" && s != "loading" && s != "ready" {
			t.Errorf("gopls's states: %v, want starting, loading and ready only", seen)
		}
	}
	t.Logf("gopls's states, as status showed them: %v", seen)
	st := f.waitStatus(t, "gopls for root .: ready, started cold at run/start (prewarm)", "pylsp for root py: ready, started cold at run/start (prewarm)")
	pid := pidIn(t, st, "gopls")
	contains(t, f.ok(t, goplsRefs), "main.go:11")
	if got := processesNamed(f.dir, "gopls"); !slices.Equal(got, []int{pid}) {
		t.Errorf("gopls processes after the first call: %v, want the prewarmed %d alone", got, pid)
	}
	f.end(t)
}

// Prewarm starts only what the spec's rule registers and the
// configuration allows: nothing with the run's lsp feature off, no server
// whose executable is missing or whose entry says prewarm: false, and no
// more than lsp.prewarm_max (the shallowest roots first).
//
// Issue 28 item 1.
func TestPrewarmStartsOnlyWhatIsAllowed(t *testing.T) {
	off := false
	cases := []struct {
		name     string
		conf     func(*Config)
		hide     []string
		features map[string]bool
		want     []string
	}{
		{name: "lsp off", features: map[string]bool{orchestrator.FeatureLSP: false}},
		{name: "gopls missing", hide: []string{"gopls"}, want: []string{"pylsp py"}},
		{name: "gopls not prewarmed", conf: func(c *Config) { c.Servers[0].Prewarm = &off }, want: []string{"pylsp py"}},
		{name: "one at most", conf: func(c *Config) { c.PrewarmMax = 1 }, want: []string{"gopls " + "."}},
		{name: "prewarm off", conf: func(c *Config) { c.PrewarmMax = 0 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conf := DefaultConfig()
			conf.KeepWarm = 0
			if c.conf != nil {
				c.conf(&conf)
			}
			dir := prewarmProject(t)
			f := newFixtureIn(t, dir, "run-"+c.name, conf, append(c.hide, "pyright-langserver")...)
			run := orchestrator.NewRun("run-"+c.name, "conv", dir, f.run.Enclosure, nil, c.features)
			t.Cleanup(func() { run.End(orchestrator.EndStopped) })
			f.run = run
			f.reg.RunStarted(run)
			if c.want != nil {
				f.waitStatus(t, "ready")
			} else {
				time.Sleep(500 * time.Millisecond) // what would have started has
			}
			got := f.started()
			for i, s := range got {
				if strings.HasSuffix(s, " "+filepath.Base(dir)) {
					got[i] = strings.TrimSuffix(s, filepath.Base(dir)) + "."
				}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("started %v, want %v", got, c.want)
			}
			run.End(orchestrator.EndStopped)
			noProcessesIn(t, dir)
		})
	}
}

// run/stop cancels a prewarm under way: ending the run just after
// run/start waits for nothing it did not start and leaves nothing
// running (parking off), whatever the prewarm had reached.
//
// Issue 28 item 1.
func TestRunStopCancelsAPrewarm(t *testing.T) {
	conf := DefaultConfig()
	conf.KeepWarm = 0
	for _, after := range []time.Duration{0, 50 * time.Millisecond, 300 * time.Millisecond} {
		f := newFixtureIn(t, prewarmProject(t), "run-cancel", conf, "pyright-langserver")
		f.reg.RunStarted(f.run)
		time.Sleep(after)
		start := time.Now()
		f.run.End(orchestrator.EndStopped)
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("run/stop %s after run/start took %s", after, d)
		}
		noProcessesIn(t, f.dir)
	}
}
