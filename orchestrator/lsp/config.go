package lsp

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Config is the lsp section of berth.yaml. Every field has a default
// (DefaultConfig); a configured Servers list replaces the built-in catalog.
type Config struct {
	// Servers is the catalog, in order of preference: for a file, the first
	// entry whose extension matches and whose root marker and executable
	// are both found serves it. A list in the file replaces the built-in
	// one as a whole.
	Servers []ServerConfig `yaml:"servers"`
	// StartTimeout bounds a server's start up to its answer to initialize.
	// Cold servers on a busy machine are slow: keep it generous.
	StartTimeout time.Duration `yaml:"start_timeout"`
	// LoadTimeout bounds the wait for a server to have loaded the project
	// (its entry's ready signal) before a workspace-wide query
	// (references, implementation, workspace symbols) is answered anyway,
	// marked as possibly incomplete; a rename is refused instead.
	LoadTimeout time.Duration `yaml:"load_timeout"`
	// ProgressGrace is how long after initialization a server whose entry
	// waits for any progress ("progress") and that has reported none is
	// taken as loaded.
	ProgressGrace time.Duration `yaml:"progress_grace"`
	// RequestTimeout bounds one request to a server.
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// DiagnosticsTimeout bounds the wait for the diagnostics of a synced
	// version of a file; past it the state is "unknown".
	DiagnosticsTimeout time.Duration `yaml:"diagnostics_timeout"`
	// Debounce is how long to keep listening for follow-up diagnostics
	// after the first answer for a synced version (a server may publish
	// a file in parts, and other files after it). A write gopls serves
	// is checked without it: gopls is asked to diagnose the workspace
	// (pull_diagnostics: gopls) and answers once it has published for
	// the importers a write broke; if it cannot be asked, the report
	// says what may be missing.
	Debounce time.Duration `yaml:"debounce"`
	// WillWriteTimeout bounds files/willWrite, which delays the harness's
	// write.
	WillWriteTimeout time.Duration `yaml:"will_write_timeout"`
	// CheckerTimeout bounds a project checker (diagnostics "*").
	CheckerTimeout time.Duration `yaml:"checker_timeout"`
	// MaxRestarts is how many times a crashed server is restarted in a row
	// before calls fail until reload. A read-only query whose server
	// crashes under it is asked once more, of the restarted server; one
	// whose server a reload closed under it follows it to the server that
	// replaced it, up to 4 times, rather than answer "call again".
	// lsp_rename is never repeated behind the agent's back.
	MaxRestarts int `yaml:"max_restarts"`
	// RestartBackoff is the wait before the first restart; it doubles with
	// each further crash in a row.
	RestartBackoff time.Duration `yaml:"restart_backoff"`
	// StderrBytes is how much of each server's stderr is kept for status
	// and errors.
	StderrBytes int `yaml:"stderr_bytes"`
	// MaxMessageBytes bounds one message a server sends: a larger
	// Content-Length ends the server with an error that names it, before
	// anything is allocated for the message (issue 24 item 2).
	MaxMessageBytes int64 `yaml:"max_message_bytes"`
	// MaxPerFile caps the diagnostics a report lists for one file.
	MaxPerFile int `yaml:"max_per_file"`
	// MaxTotal caps the diagnostics a report lists in all.
	MaxTotal int `yaml:"max_total"`
	// PrewarmMax caps how many language servers a run starts at
	// run/start, before any call (only with the run's lsp feature on, and
	// only for roots found in the workdir whose server's executable
	// resolves, as for a call); 0 turns prewarm off. The shallowest
	// roots come first.
	PrewarmMax int `yaml:"prewarm_max"`
	// PrewarmConcurrency is how many prewarmed servers start at once,
	// across every run: each holds its place until it has loaded its
	// project (or lsp.load_timeout passed), so a burst of run/starts
	// does not start every server on the machine together.
	PrewarmConcurrency int `yaml:"prewarm_concurrency"`
	// KeepWarm is how long a language server is kept, parked, after its
	// run ended, for the next run on the same enclosure, workdir and root
	// (any conversation) to adopt instead of starting one; it ends at
	// the deadline. 0 turns parking off: servers end with their run.
	KeepWarm time.Duration `yaml:"keep_warm"`
	// MaxParked caps the parked servers in all (1 or more); past it the
	// oldest ends.
	MaxParked int `yaml:"max_parked"`
	// MaxParkedPerEnclosure caps the parked servers of one enclosure
	// (one container, or the host; 1 or more); past it its oldest ends.
	MaxParkedPerEnclosure int `yaml:"max_parked_per_enclosure"`
	// MaxParkedRSSBytes caps the parked servers' resident memory in all,
	// in bytes, read when each is parked (through /proc on the host, the
	// relay in a container); past it the oldest end. 0: no cap.
	MaxParkedRSSBytes int64 `yaml:"max_parked_rss_bytes"`
	// ReopenMax caps how many documents a run reopens when it adopts a
	// parked server at run/start (prewarm): those the run that parked it
	// used (a call was about them, or it wrote them), the most recent
	// first, then those that run had inherited and not used. The server
	// then has them open, and (lsp.warm_up) asked about, before the run's
	// first call about one of them, as an editor reopens a project's last
	// tabs. An
	// adoption at a call reopens none (the call is waiting), and keeps
	// the list for the next run. 0: none.
	ReopenMax int `yaml:"reopen_max"`
	// WarmUp: a server run/start started cold (prewarm) is asked, once
	// it has loaded, for the references to the first function of the first
	// file under its root, one of the server's first language before its
	// others (the file opened for it and closed again), and
	// the answer is dropped, so that the run's first call does not pay
	// for the work a first query makes a server do: gopls type-checks a
	// package and indexes what refers to it only when a query first
	// touches it. A server run/start adopted from the pool is asked the
	// same about each document it reopened (a reopened document is
	// analysed anew at its first query). It runs in the run's thinking
	// time.
	WarmUp bool `yaml:"warm_up"`
}

// ServerConfig is one catalog entry.
type ServerConfig struct {
	// Name identifies the entry in status and errors (gopls, pyright, ...).
	Name string `yaml:"name"`
	// Languages names the languages it serves, for status.
	Languages []string `yaml:"languages"`
	// Extensions are the file extensions it serves, with the dot, mapped
	// to the LSP language id sent in didOpen.
	Extensions map[string]string `yaml:"extensions"`
	// Command is the executable and its arguments (argv, no shell).
	Command []string `yaml:"command"`
	// RootMarkers are file or directory names whose nearest directory at or
	// above a file is its root.
	RootMarkers []string `yaml:"root_markers"`
	// InitializationOptions are sent in initialize.
	InitializationOptions map[string]any `yaml:"initialization_options,omitempty"`
	// Settings answer workspace/configuration and are sent with
	// workspace/didChangeConfiguration after initialization.
	Settings map[string]any `yaml:"settings,omitempty"`
	// PositionEncoding, when set ("utf-8", "utf-16" or "utf-32"),
	// overrides what the server claims: for servers that count columns in
	// one unit while negotiating another (pylsp counts code points).
	PositionEncoding string `yaml:"position_encoding,omitempty"`
	// PullDiagnostics names a server-specific way to ask for a file's
	// diagnostics when the server offers no textDocument/diagnostic and
	// does not publish unchanged ones: "tsserver"
	// (typescript-language-server's typescript.tsserverRequest), or that
	// publishes all of them only after a delay: "gopls" (its
	// gopls.diagnose_files command).
	PullDiagnostics string `yaml:"pull_diagnostics,omitempty"`
	// Checker is the project checker run in the root for diagnostics "*"
	// and before and after lsp_rename (go vet ./..., pyright, tsc
	// --noEmit, ...); its path:line:col: message lines are parsed.
	Checker []string `yaml:"checker,omitempty"`
	// CheckerName is how reports name the checker; its command line when
	// empty. A checker that is a shell script is named by what it runs.
	CheckerName string `yaml:"checker_name,omitempty"`
	// Ready names the signal that the server has loaded the project, so
	// that a workspace-wide answer before it is never taken as complete:
	// "progress" (every $/progress begun has ended; unset means this),
	// "progress:TITLE" (the progress of that title has ended),
	// "log:REGEXP" (a window/logMessage matches), "tsserver" (tsserver
	// answers projectInfo for the file), "none" (nothing to load) or
	// "open-files" (the server knows the opened files only, so its
	// workspace-wide answers always say they may be incomplete). See the
	// lsp tool's page for each built-in server's signal.
	Ready string `yaml:"ready,omitempty"`
	// Prewarm, when false, keeps run/start from starting this server
	// before a call needs it (lsp.prewarm_max); unset is true.
	Prewarm *bool `yaml:"prewarm,omitempty"`
	// WarmUp, when false, keeps this server from being asked lsp.warm_up's
	// query: for a server whose answers depend on the files opened so far
	// (clangd without its background index), a file opened for the
	// warm-up would change the answers of the run's first calls, and only
	// when the warm-up came first. Unset is true.
	WarmUp *bool `yaml:"warm_up,omitempty"`
}

// prewarms says whether run/start may start the entry's server.
func (s ServerConfig) prewarms() bool { return s.Prewarm == nil || *s.Prewarm }

// warmsUp says whether the entry's server may be asked the warm-up.
func (s ServerConfig) warmsUp() bool { return s.WarmUp == nil || *s.WarmUp }

// DefaultConfig is the built-in configuration.
func DefaultConfig() Config {
	return Config{
		Servers:            DefaultServers(),
		StartTimeout:       2 * time.Minute,
		LoadTimeout:        2 * time.Minute,
		ProgressGrace:      1500 * time.Millisecond,
		RequestTimeout:     time.Minute,
		DiagnosticsTimeout: 20 * time.Second,
		Debounce:           500 * time.Millisecond,
		WillWriteTimeout:   5 * time.Second,
		CheckerTimeout:     5 * time.Minute,
		MaxRestarts:        3,
		RestartBackoff:     500 * time.Millisecond,
		StderrBytes:        16 << 10,
		MaxMessageBytes:    64 << 20,
		MaxPerFile:         10,
		MaxTotal:           30,
		PrewarmMax:         4,
		PrewarmConcurrency: 2,
		KeepWarm:           10 * time.Minute,
		MaxParked:          32,
		// A container's few projects; the host serves every
		// conversation that has no container.
		MaxParkedPerEnclosure: 8,
		MaxParkedRSSBytes:     4 << 30,
		ReopenMax:             8,
		WarmUp:                true,
	}
}

// DefaultServers is the built-in catalog.
func DefaultServers() []ServerConfig {
	no := false // a fresh one per call: callers may change the catalog they get
	pyMarkers := []string{"pyproject.toml", "setup.py", "setup.cfg", "requirements.txt", "pyrightconfig.json"}
	py := map[string]string{".py": "python", ".pyi": "python"}
	ts := map[string]string{".ts": "typescript", ".tsx": "typescriptreact", ".mts": "typescript", ".cts": "typescript",
		".js": "javascript", ".jsx": "javascriptreact", ".mjs": "javascript", ".cjs": "javascript"}
	return []ServerConfig{
		{Name: "gopls", Languages: []string{"go"}, Extensions: map[string]string{".go": "go"},
			Command: []string{"gopls"}, RootMarkers: []string{"go.work", "go.mod"},
			// gopls diagnoses a change twice: the changed package's type
			// errors at once, then, after its diagnosticsDelay (1 s),
			// everything (analyses, and the importers a change broke).
			// Berth pulls the second pass at once (pull_diagnostics:
			// gopls), so a write that broke a caller is not called clean.
			// The delay stays: with none, a document's first open runs
			// every analysis on the cores the query that opened it needs.
			// Workspace symbols come from the workspace's own packages:
			// by default its 100 answers are mostly the standard
			// library's, all outside the workdir, and the workspace's own
			// matches are crowded out.
			InitializationOptions: map[string]any{"symbolScope": "workspace"},
			PullDiagnostics:       pullGopls,
			Checker:               []string{"go", "vet", "./..."},
			// gopls's initialized handler loads the packages under this
			// progress (internal/server/general.go, addFolders).
			Ready: "progress:Setting up workspace"},
		{Name: "pyright", Languages: []string{"python"}, Extensions: py,
			Command: []string{"pyright-langserver", "--stdio"}, RootMarkers: pyMarkers,
			// By default pyright diagnoses open files only: a caller a
			// write breaks in another file would go unreported.
			Settings: map[string]any{"python": map[string]any{"analysis": map[string]any{"diagnosticMode": "workspace"}}},
			Checker:  []string{"pyright"},
			// Until it has enumerated the workspace's files it searches
			// only the open ones; it logs this line when it has
			// (console.info in its source enumerator).
			Ready: `log:^(Found \d+ source files?|No source files found)`},
		{Name: "pylsp", Languages: []string{"python"}, Extensions: py,
			Command: []string{"pylsp"}, RootMarkers: pyMarkers,
			// pylsp 1.7 negotiates nothing and counts columns in code
			// points (Python string indices), not UTF-16.
			PositionEncoding: "utf-32",
			// pycodestyle and mccabe report style, not breakage: an agent
			// told about every long line stops reading diagnostics.
			Settings: map[string]any{"pylsp": map[string]any{"plugins": map[string]any{
				"pycodestyle": map[string]any{"enabled": false},
				"mccabe":      map[string]any{"enabled": false},
			}}},
			Checker: []string{"/usr/bin/python3", "-m", "pyflakes", "."},
			// jedi reads the files a query needs when it runs: there is
			// no project to load.
			Ready: readyNone},
		{Name: "rust-analyzer", Languages: []string{"rust"}, Extensions: map[string]string{".rs": "rust"},
			Command: []string{"rust-analyzer"}, RootMarkers: []string{"Cargo.toml"},
			Checker: []string{"cargo", "check", "--message-format", "short"},
			// Its Fetching, Loading and Indexing work is reported as
			// progress.
			Ready: readyProgress},
		{Name: "clangd", Languages: []string{"c", "c++"},
			Extensions:  map[string]string{".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp"},
			Command:     []string{"clangd", "--background-index=false"},
			RootMarkers: []string{"compile_commands.json", "compile_flags.txt", "CMakeLists.txt", ".clangd"},
			Checker: []string{"sh", "-c", `flags=; [ -f compile_flags.txt ] && flags=@compile_flags.txt; ` +
				`find . -name '*.c' -not -path './build/*' -print0 | xargs -0 -r cc -fsyntax-only $flags; ` +
				`find . \( -name '*.cc' -o -name '*.cpp' -o -name '*.cxx' \) -not -path './build/*' -print0 | xargs -0 -r c++ -fsyntax-only $flags`},
			// Reports name it by what it runs, not by its script.
			CheckerName: "cc/c++ -fsyntax-only",
			// Without its background index (which would write .cache into
			// the project) it knows the files opened so far, no more: a
			// warm-up's file would change what the run's first calls find
			// (a definition in greet.c rather than the declaration in
			// greet.h), depending on whether it came first.
			Ready: readyOpenFiles, WarmUp: &no},
		{Name: "typescript-language-server", Languages: []string{"typescript", "javascript"}, Extensions: ts,
			Command: []string{"typescript-language-server", "--stdio"}, RootMarkers: []string{"tsconfig.json", "jsconfig.json", "package.json"},
			// The workspace's own typescript comes first; without one, the
			// typescript that provides tsc on the PATH. No syntax server:
			// while the project loads it would answer references and
			// rename from the one file alone (SyntaxRoutingTsServer's
			// syntaxAllowedCommands), a partial answer that looks whole.
			InitializationOptions: map[string]any{"tsserver": map[string]any{"fallbackPath": "tsc", "useSyntaxServer": "never"}},
			PullDiagnostics:       pullTsserver,
			Checker:               []string{"tsc", "--noEmit", "--pretty", "false"},
			Ready:                 readyTsserver},
		{Name: "dart", Languages: []string{"dart"}, Extensions: map[string]string{".dart": "dart"},
			Command: []string{"dart", "language-server", "--protocol=lsp"}, RootMarkers: []string{"pubspec.yaml"},
			Checker: []string{"dart", "analyze"},
			// The analysis server reports its analysis as progress.
			Ready: readyProgress},
	}
}

// maxReopen bounds lsp.reopen_max: the documents a run reopens are work
// for the server before the run's first call, and are listed in the
// server's record in the state directory.
const maxReopen = 64

// validate checks a configuration before it is used.
func (c Config) validate() error {
	if c.MaxMessageBytes <= 0 {
		return fmt.Errorf("lsp.max_message_bytes is %d: give the largest message a server may send, in bytes (the default is %d)", c.MaxMessageBytes, DefaultConfig().MaxMessageBytes)
	}
	switch {
	case c.KeepWarm < 0:
		return fmt.Errorf("lsp.keep_warm is %s: give how long a server is kept for the next run after its run ended, or 0 to end it with its run", c.KeepWarm)
	case c.KeepWarm > 0 && (c.MaxParked < 1 || c.MaxParkedPerEnclosure < 1):
		return fmt.Errorf("lsp.max_parked is %d and lsp.max_parked_per_enclosure %d: with lsp.keep_warm on, give each a cap of 1 or more (or set lsp.keep_warm to 0 to park nothing)", c.MaxParked, c.MaxParkedPerEnclosure)
	case c.MaxParkedRSSBytes < 0:
		return fmt.Errorf("lsp.max_parked_rss_bytes is %d: give a cap in bytes, or 0 for none", c.MaxParkedRSSBytes)
	case c.ReopenMax < 0 || c.ReopenMax > maxReopen:
		return fmt.Errorf("lsp.reopen_max is %d: give how many of an earlier run's documents a run reopens when it adopts its server, from 0 (none) to %d", c.ReopenMax, maxReopen)
	case c.PrewarmMax < 0:
		return fmt.Errorf("lsp.prewarm_max is %d: give how many servers a run starts before its first call, or 0 for none", c.PrewarmMax)
	case c.PrewarmMax > 0 && c.PrewarmConcurrency < 1:
		return fmt.Errorf("lsp.prewarm_concurrency is %d: give how many prewarmed servers may start at once (1 or more), or set lsp.prewarm_max to 0", c.PrewarmConcurrency)
	}
	for i, s := range c.Servers {
		switch {
		case s.Name == "":
			return fmt.Errorf("lsp.servers[%d]: name is empty: give every server a name", i)
		case len(s.Command) == 0:
			return fmt.Errorf("lsp.servers[%d] (%s): command is empty: name the server's executable", i, s.Name)
		case len(s.Extensions) == 0:
			return fmt.Errorf("lsp.servers[%d] (%s): extensions is empty: map at least one file extension to a language id", i, s.Name)
		case s.PositionEncoding != "" && !validEncoding(s.PositionEncoding):
			return fmt.Errorf("lsp.servers[%d] (%s): position_encoding %q: use utf-8, utf-16 or utf-32", i, s.Name, s.PositionEncoding)
		case s.PullDiagnostics != "" && s.PullDiagnostics != pullTsserver && s.PullDiagnostics != pullGopls:
			return fmt.Errorf("lsp.servers[%d] (%s): pull_diagnostics %q: the ones known are %q and %q", i, s.Name, s.PullDiagnostics, pullTsserver, pullGopls)
		case len(s.RootMarkers) == 0:
			return fmt.Errorf("lsp.servers[%d] (%s): root_markers is empty: name at least one file that marks a project root", i, s.Name)
		}
		if _, err := parseReady(s.Ready); err != nil {
			return fmt.Errorf("lsp.servers[%d] (%s): ready: %v", i, s.Name, err)
		}
	}
	return nil
}

// The Ready signals.
const (
	readyProgress  = "progress"   // every $/progress begun has ended (none within progress_grace: loaded)
	readyNone      = "none"       // no project to load: ready once initialized
	readyOpenFiles = "open-files" // knows the opened files only: a workspace-wide answer may always be incomplete
	readyTsserver  = "tsserver"   // tsserver answers projectInfo for a file once it has loaded its project
	readyTitle     = "progress:"  // the $/progress begun with this title has ended
	readyLog       = "log:"       // a window/logMessage matches
)

// readiness is a parsed Ready: its kind, and the progress title or log
// line that marks the load's end.
type readiness struct {
	kind  string // one of the ready* constants
	title string
	log   *regexp.Regexp
}

// parseReady reads a Ready value; "" is "progress".
func parseReady(v string) (readiness, error) {
	switch {
	case v == "" || v == readyProgress:
		return readiness{kind: readyProgress}, nil
	case v == readyNone || v == readyOpenFiles || v == readyTsserver:
		return readiness{kind: v}, nil
	case strings.HasPrefix(v, readyTitle) && len(v) > len(readyTitle):
		return readiness{kind: readyTitle, title: strings.TrimPrefix(v, readyTitle)}, nil
	case strings.HasPrefix(v, readyLog):
		re, err := regexp.Compile(strings.TrimPrefix(v, readyLog))
		if err != nil {
			return readiness{}, fmt.Errorf("%q: the regular expression after log: does not compile: %v", v, err)
		}
		return readiness{kind: readyLog, log: re}, nil
	}
	return readiness{}, fmt.Errorf("%q is not a readiness signal: use progress, progress:TITLE (the $/progress with that title ends), log:REGEXP (a window/logMessage matches), tsserver, none or open-files", v)
}

func validEncoding(s string) bool {
	_, ok := parseEncoding(s)
	return ok
}
