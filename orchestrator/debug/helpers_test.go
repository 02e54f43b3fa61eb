package debug

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/procfs"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeEnv); mode != "" {
		fakeAdapter(mode)
		os.Exit(0)
	}
	relaytest.Main(m)
}

// debianPython is the interpreter that has Debian's python3-debugpy; the
// python3 first on PATH may be another one without it.
const debianPython = "/usr/bin/python3"

// env is one test's run: a copy of a fixture as the working directory, a
// registry with the debug provider, and a transcript of the calls.
type env struct {
	t       *testing.T
	dir     string
	run     *orchestrator.Run
	reg     *orchestrator.Registry
	p       *Provider
	metrics *metrics.Metrics
}

// newEnv copies testdata/<fixture> into a temporary working directory and
// starts a run on it for conversation "conv-1".
func newEnv(t *testing.T, fixture string, tune func(*Config)) *env {
	t.Helper()
	return newEnvIn(t, fixture, tune, func(string) enclosure.Enclosure { return host.New() })
}

// newEnvIn is newEnv in the enclosure encFor returns for the working
// directory.
func newEnvIn(t *testing.T, fixture string, tune func(*Config), encFor func(dir string) enclosure.Enclosure) *env {
	t.Helper()
	dir := t.TempDir()
	if fixture != "" {
		if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", fixture))); err != nil {
			t.Fatal(err)
		}
	}
	dir, _ = filepath.EvalSymlinks(dir)
	cfg := DefaultConfig()
	cfg.Python = debianPython
	if tune != nil {
		tune(&cfg)
	}
	m := metrics.NewForTest()
	p, err := New(cfg, m)
	if err != nil {
		t.Fatal(err)
	}
	reg := orchestrator.NewRegistry(m, 0)
	reg.Add(p)
	run := orchestrator.NewRun("run-1", "conv-1", dir, encFor(dir), nil, nil)
	e := &env{t: t, dir: dir, run: run, reg: reg, p: p, metrics: m}
	t.Cleanup(func() { run.End("test over") })
	return e
}

// conv is the test run's conversation entry.
func (e *env) conv() *conversation {
	e.t.Helper()
	c, err := e.p.join(e.run)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// call sends one debug call and logs it as a transcript line pair.
func (e *env) call(args string) *orchestrator.Result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := e.reg.Call(ctx, e.run, orchestrator.SurfaceFull, "debug", json.RawMessage(args))
	if err != nil {
		e.t.Fatalf(">> debug %s\n<< Go error: %v", args, err)
	}
	mark := "<<"
	if res.IsError {
		mark = "<< (error)"
	}
	e.t.Logf(">> debug %s\n%s %s", args, mark, res.FirstText())
	return res
}

// ok calls and requires a success whose text holds every want.
func (e *env) ok(args string, want ...string) string {
	e.t.Helper()
	res := e.call(args)
	if res.IsError {
		e.t.Fatalf("debug %s failed: %s", args, res.FirstText())
	}
	has(e.t, res.FirstText(), want...)
	return res.FirstText()
}

// fails calls and requires an error result whose text holds every want.
func (e *env) fails(args string, want ...string) string {
	e.t.Helper()
	res := e.call(args)
	if !res.IsError {
		e.t.Fatalf("debug %s succeeded, want an error: %s", args, res.FirstText())
	}
	has(e.t, res.FirstText(), want...)
	return res.FirstText()
}

func has(t *testing.T, text string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Fatalf("missing %q in:\n%s", w, text)
		}
	}
}

// reference finds "NAME ... [reference N]" in a variables listing.
func reference(t *testing.T, text, prefix string) string {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		if i := strings.LastIndex(line, "[reference "); i >= 0 {
			return strings.TrimSuffix(line[i+len("[reference "):], "]")
		}
	}
	t.Fatalf("no %q line with a reference in:\n%s", prefix, text)
	return ""
}

// after returns the integer that follows key in text ("frame_id 3").
func after(t *testing.T, text, key string) string {
	t.Helper()
	i := strings.Index(text, key)
	if i < 0 {
		t.Fatalf("no %q in:\n%s", key, text)
	}
	rest := text[i+len(key):]
	j := 0
	for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	return rest[:j]
}

// noProcess fails if a process still runs in dir (its working directory
// is inside it): adapters and debuggees are started there.
func noProcess(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := processesIn(dir)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left running in %s:\n%s", dir, strings.Join(left, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// processesIn lists the processes (zombies too) whose working directory
// is inside dir.
func processesIn(dir string) []string { return procfs.Strings(procfs.In(dir)) }
