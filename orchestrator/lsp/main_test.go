package lsp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// fakeBin is testdata/fakelsp, built once for the package.
var fakeBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lsp-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakeBin = filepath.Join(dir, "fakelsp")
	if out, err := exec.Command("go", "build", "-o", fakeBin, "./testdata/fakelsp").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building testdata/fakelsp: %v\n%s", err, out)
		os.Exit(1)
	}
	code := relaytest.Run(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// fixture is a run on a copy of a testdata project, with the provider
// registered so calls go through dispatch's validation.
type fixture struct {
	dir string
	run *orchestrator.Run
	reg *orchestrator.Registry
	p   *Provider
}

// hiding is the host enclosure with some executables hidden from
// LookPath, to show status and detection when a server is missing.
type hiding struct {
	enclosure.Enclosure
	hidden map[string]bool
}

func (h hiding) LookPath(ctx context.Context, name string) (string, error) {
	if h.hidden[name] {
		return "", enclosure.ErrNotFound
	}
	return h.Enclosure.LookPath(ctx, name)
}

func newFixture(t *testing.T, project string, conf Config, hide ...string) *fixture {
	t.Helper()
	dir := t.TempDir()
	dir, _ = filepath.EvalSymlinks(dir)
	if project != "" {
		copyTree(t, filepath.Join("testdata", project), dir)
	}
	return newFixtureIn(t, dir, "run-"+project, conf, hide...)
}

// newFixtureIn is newFixture on a workdir the test has laid out itself.
func newFixtureIn(t *testing.T, dir, runID string, conf Config, hide ...string) *fixture {
	t.Helper()
	var enc enclosure.Enclosure = host.New()
	if len(hide) > 0 {
		h := hiding{Enclosure: enc, hidden: map[string]bool{}}
		for _, n := range hide {
			h.hidden[n] = true
		}
		enc = h
	}
	return newFixtureOn(t, dir, runID, conf, enc)
}

// newFixtureOn is newFixtureIn in the enclosure enc.
func newFixtureOn(t *testing.T, dir, runID string, conf Config, enc enclosure.Enclosure) *fixture {
	t.Helper()
	p, err := New(conf, metrics.NewForTest())
	if err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs last: once the run has ended, the
	// servers it parked end as they would when Berth stops.
	t.Cleanup(p.Shutdown)
	reg := orchestrator.NewRegistry(p.metrics, 0)
	reg.Add(p)
	reg.SetWriteObserver(p)
	run := orchestrator.NewRun(runID, "conv", dir, enc, nil, nil)
	t.Cleanup(func() { run.End(orchestrator.EndStopped) })
	return &fixture{dir: dir, run: run, reg: reg, p: p}
}

// testRoot is the workspace root of dir, for a server built by hand.
func testRoot(t *testing.T, dir string) *workspace.Root {
	t.Helper()
	root, err := workspace.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// call calls a tool and returns its text and whether it was an error.
func (f *fixture) call(t *testing.T, tool string, a map[string]any) (string, bool) {
	t.Helper()
	raw, _ := json.Marshal(a)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	res, err := f.reg.Call(ctx, f.run, orchestrator.SurfaceFull, tool, raw)
	if d := time.Since(start); d > 2*time.Second {
		t.Logf("slow: %s %s took %s", tool, raw, d.Round(time.Millisecond))
	}
	if err != nil {
		t.Fatalf("%s %v: %v", tool, a, err)
	}
	var parts []string
	for _, b := range res.Content {
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, "\n"), res.IsError
}

// ok calls lsp and fails the test on an error result.
func (f *fixture) ok(t *testing.T, a map[string]any) string {
	t.Helper()
	text, isErr := f.call(t, "lsp", a)
	if isErr {
		t.Fatalf("lsp %v: error result:\n%s", a, text)
	}
	return text
}

// fails calls lsp and fails the test unless the result is an error.
func (f *fixture) fails(t *testing.T, a map[string]any) string {
	t.Helper()
	text, isErr := f.call(t, "lsp", a)
	if !isErr {
		t.Fatalf("lsp %v: want an error result, got:\n%s", a, text)
	}
	return text
}

// write replaces a file and reports it as the harness would.
func (f *fixture) write(t *testing.T, rel, content string) *orchestrator.WriteReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := f.p.WillWrite(ctx, f.run, []string{rel}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, rel), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rep, err := f.p.DidWrite(ctx, f.run, []string{rel})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("didWrite %s: %s in %s", rel, rep.State, time.Since(start).Round(time.Millisecond))
	return rep
}

func (f *fixture) read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func contains(t *testing.T, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("want %q in:\n%s", w, got)
		}
	}
}
