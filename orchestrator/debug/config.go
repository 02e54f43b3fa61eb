package debug

import (
	"time"
)

// Config is the debug section of the configuration. Every field has a
// default (DefaultConfig).
type Config struct {
	// SessionTTL is the strict lifetime of a session from launch; past it
	// the session is terminated whatever it is doing.
	SessionTTL time.Duration `yaml:"session_ttl"`
	// StopWait bounds how long continue and step_* wait for the program to
	// stop before answering "still running".
	StopWait time.Duration `yaml:"stop_wait"`
	// BuildWait replaces debug.stop_wait for a launch whose adapter builds
	// the program first (delve compiles the package before it runs).
	BuildWait time.Duration `yaml:"build_wait"`
	// RequestWait bounds one request to the adapter (stack, variables, …).
	RequestWait time.Duration `yaml:"request_wait"`
	// Python is the interpreter used for debugpy when the working
	// directory has no .venv/bin/python or venv/bin/python.
	Python string `yaml:"python"`
	// OutputLimit caps each of the debuggee's kept stdout and stderr, in bytes;
	// the oldest output is dropped first.
	OutputLimit int `yaml:"output_limit"`
	// PrebuildMax is how many project roots a run prebuilds for at
	// run/start (see debug.adapters[].prebuild), the shallowest first; 0 turns
	// prebuilds off.
	PrebuildMax int `yaml:"prebuild_max"`
	// PrebuildTimeout bounds one prebuild; past it the prebuild is ended
	// and what it compiled so far stays in the build cache.
	PrebuildTimeout time.Duration `yaml:"prebuild_timeout"`
	// Adapters is the catalog, tried in this order. A list in the file
	// replaces the built-in one as a whole.
	Adapters []Adapter `yaml:"adapters"`
}

// Adapter is one debug adapter of the catalog.
type Adapter struct {
	// ID names the adapter (debugpy, delve, lldb, dart).
	ID string `yaml:"id"`
	// Executables are the names tried for the adapter's program, first
	// found wins (lldb-dap is also installed as lldb-dap-NN). Ignored when
	// interpreter is set.
	Executables []string `yaml:"executables"`
	// Interpreter, when "python", runs the adapter with the working
	// directory's .venv/bin/python or venv/bin/python, else debug.python;
	// that interpreter is also the debuggee's.
	Interpreter string `yaml:"interpreter,omitempty"`
	// Module is a module that must import in that interpreter (debugpy).
	Module string `yaml:"module,omitempty"`
	// Args follow the executable.
	Args []string `yaml:"args"`
	// Transport is "stdio", or "tcp": the adapter prints the address it
	// listens on (args should ask for port 0) and is reached through the
	// enclosure's Dial.
	Transport string `yaml:"transport"`
	// Markers are the root markers; one must exist at or above the program,
	// inside the working directory.
	Markers []string `yaml:"markers"`
	// Extensions are the program file extensions the adapter debugs.
	Extensions []string `yaml:"extensions"`
	// PackageExtension, when set, makes a directory holding files with it a
	// program (a Go package for delve).
	PackageExtension string `yaml:"package_extension,omitempty"`
	// SourceExtensions are the source files whose stored breakpoints the
	// adapter is sent; the others are held back, and launch says which.
	// Empty: Extensions and PackageExtension; when those are empty too,
	// every file's.
	SourceExtensions []string `yaml:"source_extensions,omitempty"`
	// Native makes a native executable (ELF) a program of this adapter.
	Native bool `yaml:"native,omitempty"`
	// Builds says the launch compiles first, so it waits debug.build_wait.
	Builds bool `yaml:"builds,omitempty"`
	// Prebuild, when set, is a command run at run/start, in the
	// background and at the lowest CPU priority, in each root of the
	// working directory (a directory holding one of its markers), when the
	// run's debug feature is on and the adapter's executable and the
	// command's are both found: it compiles what a launch would compile
	// first (delve's build flags) into the build cache, so that the
	// run's first launch finds it there. It writes nothing in the
	// working directory. It failed when it exits non-zero or prints
	// anything on stdout (the last line is what status says), so it
	// prints only its errors there. A launch in its root ends it (what it
	// compiled stays cached); the end of the runs that share it (one
	// prebuild runs per root and enclosure) or debug.prebuild_timeout
	// ends it too.
	Prebuild []string `yaml:"prebuild,omitempty"`
	// PrebuildEnv is added to the prebuild's environment, KEY=VALUE:
	// what the adapter sets for its own build (delve's CGO_CFLAGS, which
	// delve sets only when it is unset: where the enclosure sets its own,
	// set the same value here, or cgo packages are compiled twice).
	PrebuildEnv []string `yaml:"prebuild_env,omitempty"`
	// AdapterID is sent in initialize.
	AdapterID string `yaml:"adapter_id"`
	// Launch holds adapter-specific launch arguments; program, args and
	// cwd are added by Berth.
	Launch map[string]any `yaml:"launch"`
	// ExceptionFilters are enabled when the adapter offers them.
	ExceptionFilters []string `yaml:"exception_filters"`
	// EvaluateContext is the DAP context evaluate sends: "repl" (the
	// default; unset means this) or "watch" (the built-in lldb entry's). lldb-dap's repl answers in its command style,
	// "(int) $1 = 4", and runs a name that is also an lldb command (c,
	// bt) as that command; watch evaluates an expression and answers
	// with its value.
	EvaluateContext string `yaml:"evaluate_context,omitempty"`
}

// DefaultConfig is the built-in configuration.
func DefaultConfig() Config {
	return Config{
		SessionTTL:      30 * time.Minute,
		StopWait:        30 * time.Second,
		BuildWait:       3 * time.Minute,
		RequestWait:     15 * time.Second,
		Python:          "python3",
		OutputLimit:     64 << 10,
		PrebuildMax:     1,
		PrebuildTimeout: 2 * time.Minute,
		Adapters: []Adapter{
			{
				ID: "debugpy", Interpreter: "python", Module: "debugpy",
				Args: []string{"-m", "debugpy.adapter"}, Transport: "stdio",
				Markers:    []string{"pyproject.toml", "setup.py", "requirements.txt"},
				Extensions: []string{".py"}, SourceExtensions: []string{".py", ".pyw"}, AdapterID: "python",
				Launch: map[string]any{
					"type": "python", "console": "internalConsole",
					"redirectOutput": true, "justMyCode": true,
				},
				ExceptionFilters: []string{"uncaught"},
			},
			{
				ID: "delve", Executables: []string{"dlv"},
				Args: []string{"dap", "--listen", "127.0.0.1:0"}, Transport: "tcp",
				Markers: []string{"go.mod"}, Extensions: []string{".go"}, PackageExtension: ".go", SourceExtensions: []string{".go"},
				Builds: true, AdapterID: "go",
				// What delve's build compiles (pkg/gobuild: -gcflags='all=-N
				// -l', and CGO_CFLAGS='-O0 -g' when unset), without linking
				// or writing a file: go list -export compiles each package
				// as go build would, into the same cache entries.
				// It prints only the packages that failed to compile.
				Prebuild: []string{"go", "list", "-e", "-export", "-deps", "-gcflags=all=-N -l",
					"-f", "{{if .Error}}{{.ImportPath}}: {{.Error}}{{end}}", "./..."},
				PrebuildEnv: []string{"CGO_CFLAGS=-O0 -g"},
				Launch:      map[string]any{"mode": "debug", "outputMode": "remote"},
			},
			{
				ID: "lldb", Executables: []string{"lldb-dap", "lldb-dap-21", "lldb-dap-20", "lldb-dap-19", "lldb-dap-18", "lldb-dap-17"},
				Transport: "stdio", Markers: []string{"Cargo.toml", "CMakeLists.txt"},
				Native: true, AdapterID: "lldb-dap",
				// The languages lldb debugs natively: C, C++, Objective-C,
				// Rust, Swift, Zig.
				SourceExtensions: []string{".c", ".h", ".cc", ".cpp", ".cxx", ".c++", ".hpp", ".hh", ".hxx", ".h++", ".inl", ".ipp", ".tpp",
					".m", ".mm", ".rs", ".swift", ".zig"},
				// lldb turns ASLR off with personality(2), which Docker's
				// default seccomp profile refuses: the launch failed in
				// every container ("personality set failed"). The
				// target's setting, not only disableASLR, decides.
				Launch: map[string]any{"disableASLR": false,
					"initCommands": []string{"settings set target.disable-aslr false"}},
				EvaluateContext: "watch",
			},
			{
				ID: "dart", Executables: []string{"dart"}, Args: []string{"debug_adapter"},
				Transport: "stdio", Markers: []string{"pubspec.yaml"},
				Extensions: []string{".dart"}, SourceExtensions: []string{".dart"}, AdapterID: "dart", Launch: map[string]any{},
			},
		},
	}
}
