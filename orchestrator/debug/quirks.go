package debug

import (
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-dap"
)

// An adapter's catalog entry is also its quirks: what it needs beyond the
// protocol, read from its fields by the methods here (the only methods of
// Adapter). Which files' breakpoints it takes (lldb would list a Python
// line as unverified, delve fail on a file its build never saw), the
// launch arguments it wants (debugpy's interpreter, delve's output
// binary), how long its launch may take (delve builds first), which
// exception filters it is asked for, and the context evaluate sends
// (lldb-dap's "watch").

// takes says whether the adapter is sent the breakpoints of file, by its
// extension (SourceExtensions).
func (a *Adapter) takes(file string) bool {
	exts := a.SourceExtensions
	if len(exts) == 0 {
		exts = a.Extensions
		if a.PackageExtension != "" {
			exts = append(append([]string(nil), exts...), a.PackageExtension)
		}
	}
	if len(exts) == 0 {
		return true
	}
	ext := strings.TrimPrefix(filepath.Ext(file), ".")
	for _, e := range exts {
		if strings.EqualFold(strings.TrimPrefix(e, "."), ext) {
			return true
		}
	}
	return false
}

// launchArgs are the arguments of its launch request: its entry's Launch,
// with program, args and cwd (as the adapter sees them) added, the
// interpreter exe for an adapter run by one (debugpy), and, for an
// adapter that builds the program (delve), the temporary path of the
// binary (built, "" for none), never in the checkout.
func (a *Adapter) launchArgs(program string, args []string, cwd, exe string) (launch map[string]any, built string) {
	launch = map[string]any{}
	for k, v := range a.Launch {
		launch[k] = v
	}
	launch["request"] = "launch"
	launch["program"] = program
	launch["args"] = append([]string{}, args...)
	launch["cwd"] = cwd
	if a.Interpreter != "" {
		launch["python"] = exe
	}
	if a.Builds {
		built = builtPath()
		launch["output"] = built
	}
	return launch, built
}

// launchWait bounds the launch steps the program's start may hold up:
// debug.build_wait for an adapter that builds first, else
// debug.request_wait.
func (a *Adapter) launchWait(cfg *Config) time.Duration {
	if a.Builds {
		return cfg.BuildWait
	}
	return cfg.RequestWait
}

// exceptionFilters are the configured filters the adapter offers (caps);
// nil when the adapter offers none (the request is then not sent).
func (a *Adapter) exceptionFilters(caps dap.Capabilities) []string {
	if len(caps.ExceptionBreakpointFilters) == 0 {
		return nil
	}
	filters := []string{}
	for _, want := range a.ExceptionFilters {
		for _, f := range caps.ExceptionBreakpointFilters {
			if f.Filter == want {
				filters = append(filters, want)
			}
		}
	}
	return filters
}

// evaluateContext is the context evaluate sends: its entry's, "repl"
// when unset.
func (a *Adapter) evaluateContext() string {
	if a.EvaluateContext == "" {
		return "repl"
	}
	return a.EvaluateContext
}
