package lsp

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

// TestDetection covers the intersection rule without starting a server:
// each missing half is named, never guessed.
func TestDetection(t *testing.T) {
	f := newFixture(t, "missing", DefaultConfig(), "rust-analyzer", "dart")
	q := func(file string) map[string]any {
		return map[string]any{"action": "hover", "file": file, "line": 1, "symbol": "f"}
	}
	cases := []struct {
		file string
		want []string
	}{
		{"rust/src/main.rs", []string{"no language server can serve rust/src/main.rs", `rust-analyzer: executable "rust-analyzer" not found in the host enclosure`}},
		{"dart/lib/main.dart", []string{`dart: executable "dart" not found in the host enclosure`}},
		{"loose/loose.go", []string{"gopls: no root marker (go.work, go.mod) at or above loose/ inside the workdir"}},
		{"loose/stray.rs", []string{"rust-analyzer: no root marker (Cargo.toml) at or above loose/ inside the workdir; and executable \"rust-analyzer\" not found"}},
		{"README.md", []string{`no language server is configured for ".md" files (README.md)`, ".go", ".py"}},
	}
	for _, c := range cases {
		contains(t, f.fails(t, q(c.file)), c.want...)
	}
	status := f.ok(t, map[string]any{"action": "status", "file": "rust/src/main.rs"})
	contains(t, status, "Language servers of this run (0):", "none started yet",
		`rust-analyzer (rust): roots at rust; executable "rust-analyzer" MISSING in the host enclosure`,
		`dart (dart): roots at dart; executable "dart" MISSING in the host enclosure`,
		"gopls (go): root marker (go.work, go.mod) MISSING in the workdir; executable ",
		"no language server can serve rust/src/main.rs")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := f.p.DidWrite(ctx, f.run, []string{"rust/src/main.rs", "README.md"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.State != orchestrator.WriteUnknown || len(rep.Diagnostics) != 0 {
		t.Errorf("a write no server can check: want unknown, got %s", rep.State)
	}
	contains(t, rep.Text, "Not checked (state unknown, not clean):", "README.md was not checked: no language server is meant for .md files.",
		`rust/src/main.rs: no language server can serve rust/src/main.rs: rust-analyzer: executable "rust-analyzer" not found`)
	if _, err := f.p.DidWrite(ctx, f.run, []string{"../outside.go"}); err == nil || !strings.Contains(err.Error(), "outside the working directory") {
		t.Errorf("a path outside the workdir: %v", err)
	}
	// A server already running for the root needs no new search of its
	// executable; without one, the missing executable is named.
	abs := filepath.Join(f.dir, "rust/src/main.rs")
	running := func(root, name string) bool { return name == "rust-analyzer" && root == filepath.Join(f.dir, "rust") }
	if m, bad := detect(ctx, f.run, f.p.conf, abs, running); bad != nil || m.cfg.Name != "rust-analyzer" {
		t.Errorf("a running server was not chosen: %+v %v", m, bad)
	}
	if _, bad := detect(ctx, f.run, f.p.conf, abs, func(string, string) bool { return false }); bad == nil {
		t.Error("with no server running, the missing executable was not named")
	}
	f.run.SetFeatures(map[string]bool{orchestrator.FeatureLSP: false})
	if rep, _ := f.p.DidWrite(ctx, f.run, []string{"README.md"}); rep.State != orchestrator.WriteUnknown || !strings.Contains(rep.Text, "off for this run") {
		t.Errorf("lsp off: %+v", rep)
	}
}

func TestConfig(t *testing.T) {
	cases := []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Servers[0].Command = nil }, "lsp.servers[0] (gopls): command is empty"},
		{func(c *Config) { c.Servers[1].RootMarkers = nil }, "lsp.servers[1] (pyright): root_markers is empty"},
		{func(c *Config) { c.Servers[2].PositionEncoding = "utf-7" }, `position_encoding "utf-7": use utf-8, utf-16 or utf-32`},
		{func(c *Config) { c.Servers[0].Name = "" }, "lsp.servers[0]: name is empty"},
		{func(c *Config) { c.ReopenMax = -1 }, "lsp.reopen_max is -1: give how many of an earlier run's documents a run reopens when it adopts its server, from 0 (none) to 64"},
		{func(c *Config) { c.ReopenMax = maxReopen + 1 }, "lsp.reopen_max is 65"},
	}
	for _, c := range cases {
		conf := DefaultConfig()
		c.edit(&conf)
		if _, err := New(conf, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want %q, got %v", c.want, err)
		}
	}
	for _, n := range []int{0, maxReopen} { // the bounds themselves are taken
		conf := DefaultConfig()
		conf.ReopenMax = n
		if _, err := New(conf, metrics.NewForTest()); err != nil {
			t.Errorf("lsp.reopen_max %d: %v", n, err)
		}
	}
}

// Issue 12 item 4: the lsp section's durations are time.Durations, read
// and printed as the other sections' are ("1m30s"); one that is not a
// duration is refused, naming it.
func TestLSPDurationsAreTimeDurations(t *testing.T) {
	conf := DefaultConfig()
	if err := yamlUnmarshal("debounce: 90s\nload_timeout: 1h30m\n", &conf); err != nil || conf.Debounce != 90*time.Second || conf.LoadTimeout != 90*time.Minute {
		t.Errorf("read: debounce %s, load_timeout %s, %v", conf.Debounce, conf.LoadTimeout, err)
	}
	out, err := yaml.Marshal(conf)
	if err != nil || !strings.Contains(string(out), "debounce: 1m30s\n") || !strings.Contains(string(out), "progress_grace: 1.5s\n") {
		t.Errorf("printed:\n%s %v", out, err)
	}
	if err := yamlUnmarshal("debounce: soon\n", &conf); err == nil || !strings.Contains(err.Error(), "`soon` into time.Duration") {
		t.Errorf("bad duration: %v", err)
	}
}

// lsp and lsp_rename are registered only for a run with a working
// directory.
func TestNoWorkdirNoTools(t *testing.T) {
	p, err := New(DefaultConfig(), metrics.NewForTest())
	if err != nil {
		t.Fatal(err)
	}
	run := orchestrator.NewRun("run-nowhere", "conv", "", host.New(), nil, nil)
	defer run.End(orchestrator.EndStopped)
	if tools := p.Tools(run); len(tools) != 0 {
		t.Errorf("a run without a workdir got %d tools", len(tools))
	}
}

// diagnostics "*" runs an entry's checker in each of its outermost roots,
// here a module below the workdir, with paths relative to the workdir.
func TestCheckerInASubdirectory(t *testing.T) {
	f := newFixture(t, "", DefaultConfig())
	svc := filepath.Join(f.dir, "svc")
	copyTree(t, filepath.Join("testdata", "go"), svc)
	main := f.read(t, "svc/main.go")
	bad := strings.Replace(main, "func main() {", "var count int = \"three\"\n\nfunc main() {", 1)
	if err := os.WriteFile(filepath.Join(svc, "main.go"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	contains(t, f.ok(t, map[string]any{"action": "diagnostics", "file": "*"}),
		"go vet ./... in svc (exit 1): 1 problem(s)", "svc/main.go:9:17: cannot use \"three\"")
}

// A checker that prints without end is read up to the limit, ends, and
// the answer says so.
func TestCheckerOutputIsBounded(t *testing.T) {
	conf := DefaultConfig()
	for i := range conf.Servers {
		if conf.Servers[i].Name == "gopls" {
			conf.Servers[i].Checker = []string{"sh", "-c", "head -c 12000000 /dev/zero | tr '\\0' x; head -c 12000000 /dev/zero | tr '\\0' y >&2; exit 1"}
		}
	}
	f := newFixture(t, "go", conf)
	out, _ := f.call(t, "lsp", map[string]any{"action": "diagnostics", "file": "*"})
	contains(t, out, "(exit 1): 0 problem(s) (its output passed 4 MiB, and only that much of it was read")
	if len(out) > 10000 {
		t.Errorf("the answer holds %d bytes of the checker's output", len(out))
	}
}
