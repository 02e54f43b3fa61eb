package debug

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

func TestAdaptersExplainsWhatIsMissing(t *testing.T) {
	cases := []struct {
		name    string
		fixture string
		tune    func(*Config)
		want    []string
	}{
		{"python project with debugpy", "python", nil, []string{
			"debugpy: usable (marker requirements.txt in the working directory, executable /usr/bin/python3)",
			"delve: not usable: no root marker (go.mod) at the top of the working directory (executable ",
			"dart: not usable: no root marker (pubspec.yaml) at the top of the working directory; executable not found: none of dart is on the host enclosure's PATH",
		}},
		{"go project", "golang", nil, []string{"delve: usable (marker go.mod in the working directory, executable ", "debugpy: not usable: no root marker (pyproject.toml, setup.py, requirements.txt)"}},
		{"c project finds lldb-dap", "c", nil, []string{"lldb: usable (marker CMakeLists.txt in the working directory, executable "}},
		{"no markers at all", "empty", nil, []string{"debugpy: not usable: no root marker", "lldb: not usable: no root marker (Cargo.toml, CMakeLists.txt)"}},
		{"missing executable", "c", func(c *Config) { c.Adapters[2].Executables = []string{"no-such-lldb-dap"} }, []string{
			"lldb: not usable: executable not found: none of no-such-lldb-dap is on the host enclosure's PATH; install it there or set debug.adapters[lldb].executables (marker CMakeLists.txt found)",
		}},
		{"versioned lldb-dap", "c", func(c *Config) { c.Adapters[2].Executables = []string{"no-such-lldb-dap", "lldb-dap-19"} }, []string{
			"lldb: usable (marker CMakeLists.txt in the working directory, executable /usr/bin/lldb-dap-19)",
		}},
		{"interpreter without debugpy", "python", func(c *Config) { c.Python = "/bin/true-python-missing" }, []string{
			"debugpy: not usable: no interpreter: the working directory has no .venv/bin/python or venv/bin/python and /bin/true-python-missing is not on the PATH",
		}},
		{"debugpy not importable", "python", func(c *Config) { c.Adapters[0].Module = "no_such_module_berth" }, []string{
			"debugpy: not usable: no_such_module_berth is not importable in /usr/bin/python3 (ModuleNotFoundError: No module named 'no_such_module_berth')",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.fixture, tc.tune)
			e.ok(`{"operation":"adapters"}`, tc.want...)
		})
	}
}

// TestVenvPythonPreferred: a .venv/bin/python in the working directory is
// used for the adapter and the debuggee instead of the configured one.
func TestVenvPythonPreferred(t *testing.T) {
	e := newEnv(t, "python", func(c *Config) { c.Python = "/no/such/python" })
	venv := filepath.Join(e.dir, ".venv", "bin")
	if err := os.MkdirAll(venv, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(debianPython, filepath.Join(venv, "python")); err != nil {
		t.Fatal(err)
	}
	e.ok(`{"operation":"adapters"}`, "debugpy: usable (marker requirements.txt in the working directory, executable "+filepath.Join(venv, "python")+")")
	e.ok(`{"operation":"breakpoints","file":"app.py","lines":[13]}`)
	e.ok(`{"operation":"launch","program":"app.py"}`, "stopped (breakpoint)")
	e.ok(`{"operation":"evaluate","expression":"__import__('sys').executable"}`, filepath.Join(venv, "python"))
	e.ok(`{"operation":"terminate"}`)
}

func TestLaunchRefusals(t *testing.T) {
	e := newEnv(t, "python", nil)
	if err := os.WriteFile(filepath.Join(e.dir, "notes.txt"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "main.go"), []byte("package main\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.fails(`{"operation":"launch","program":"../outside.py"}`, "outside the working directory")
	e.fails(`{"operation":"launch","program":"missing.py"}`, "program missing.py does not exist: pass an existing file")
	e.fails(`{"operation":"launch","program":"notes.txt"}`, "no adapter debugs notes.txt", "debugpy (.py)", "a native executable")
	e.fails(`{"operation":"launch","program":"main.go"}`, "delve cannot debug main.go here: no root marker (go.mod)", "the adapters operation")
	for name, body := range map[string]string{"dart/pubspec.yaml": "name: app\n", "dart/main.dart": "void main() {}\n"} {
		if err := os.MkdirAll(filepath.Join(e.dir, "dart"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(e.dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.fails(`{"operation":"launch","program":"dart/main.dart"}`, "dart cannot debug dart/main.dart here: executable not found: none of dart is on the host enclosure's PATH")
	e.fails(`{"operation":"launch"}`, `launch needs "program" (launch: a .py or .go file`)
	e.fails(`{"operation":"launch","program":"app.py","port":3}`, `launch does not take "port" (it takes only "args", "program")`)
	e.fails(`{"operation":"status","file":"app.py"}`, `status does not take "file" (it takes no other arguments)`)
	e.fails(`{"operation":"breakpoints","file":"app.py"}`, `breakpoints needs "lines" (breakpoints: 1-based lines; empty clears the file)`)
	e.fails(`{"operation":"breakpoints","file":"nope.py","lines":[1]}`, "nope.py is not a readable file (no such file or directory)")
	e.fails(`{"operation":"variables"}`, `variables needs "reference" (variables: a reference from scopes, variables or evaluate)`)
	e.fails(`{"operation":"fly"}`, "invalid arguments for debug", "operation")
	e.fails(`{"operation":"continue"}`, "no debug session is running in this conversation", "call launch")
	e.ok(`{"operation":"output"}`, "no debug session has run")
	e.ok(`{"operation":"status"}`, "no debug session is running in this conversation")
}

func TestToolNeedsConversation(t *testing.T) {
	p, err := New(DefaultConfig(), metrics.NewForTest())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		conv, dir string
		want      int
	}{{"", "/tmp", 0}, {"c", "", 0}, {"c", "/tmp", 1}} {
		run := orchestrator.NewRun("r", tc.conv, tc.dir, host.New(), nil, nil)
		if got := len(p.Tools(run)); got != tc.want {
			t.Errorf("conversation %q workdir %q: %d tools, want %d", tc.conv, tc.dir, got, tc.want)
		}
		run.End("test over")
	}
	run := orchestrator.NewRun("r", "c", "/tmp", host.New(), nil, nil)
	defer run.End("test over")
	spec := p.Tools(run)[0].Spec()
	if !strings.Contains(spec.Description, "it ends by itself 30m0s after launch") {
		t.Errorf("the description does not give the time to live: %s", spec.Description)
	}
	if spec.Tier != orchestrator.Exec || spec.ParallelSafe {
		t.Fatalf("debug is tier %s, parallel-safe %v; want exec, not parallel-safe", spec.Tier, spec.ParallelSafe)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		tune func(*Config)
		want string
	}{
		{"zero ttl", func(c *Config) { c.SessionTTL = 0 }, "debug.session_ttl must be a positive duration"},
		{"bad transport", func(c *Config) { c.Adapters[1].Transport = "pipe" }, "transport must be stdio or tcp"},
		{"duplicate id", func(c *Config) { c.Adapters[1].ID = "debugpy" }, "unique id"},
		{"no markers", func(c *Config) { c.Adapters[3].Markers = nil }, "at least one root marker"},
		{"no python", func(c *Config) { c.Python = "" }, "debug.python must name an interpreter"},
	} {
		cfg := DefaultConfig()
		tc.tune(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}
