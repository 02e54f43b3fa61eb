package lsp

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/orchestrator"
)

// TestPython runs the python servers: pyright (preferred) and pylsp (when
// pyright is not installed), on the same project.
func TestPython(t *testing.T) {
	for _, c := range []struct {
		server string
		hide   []string
		undef  string // the message for an undefined name
		edits  []string
	}{
		{"pyright", nil, `"undefined_name" is not defined`, []string{"greet.py: 1 edit(s)", "main.py: 4 edit(s)"}},
		// pylsp (jedi) sends one edit per file that replaces it whole.
		{"pylsp", []string{"pyright-langserver"}, "undefined name 'undefined_name'", []string{"greet.py: 1 edit(s)", "main.py: 1 edit(s)"}},
	} {
		t.Run(c.server, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, "py", DefaultConfig(), c.hide...)
			q := func(action, file string, line int, symbol string) map[string]any {
				return map[string]any{"action": action, "file": file, "line": line, "symbol": symbol}
			}
			contains(t, f.ok(t, map[string]any{"action": "status", "file": "main.py"}), "main.py is served by "+c.server+" with root .")
			if c.server == "pylsp" {
				// pylsp lints each file alone: its report says other
				// files were not checked.
				greet := f.read(t, "greet.py")
				rep := f.write(t, "greet.py", strings.Replace(greet, "def hello(name: str)", "def hello(name: str, loud: bool)", 1))
				contains(t, rep.Text, "pylsp reports only on files it has open: other files that use what changed were not checked")
				f.write(t, "greet.py", greet)
			}
			contains(t, f.ok(t, q("definition", "main.py", 4, "g.greet")), "greet.py:7:9: def greet(self, name: str) -> str:")
			// hello( follows non-ASCII text: the column must count it.
			contains(t, f.ok(t, q("definition", "main.py", 4, "hello(")), "greet.py:12:5: def hello(name: str) -> str:")
			contains(t, f.ok(t, q("references", "greet.py", 12, "def hello")), "greet.py:12:5:", "main.py:1:28:", "main.py:4:27:", "main.py:5:7:", "main.py:5:23:")
			contains(t, f.ok(t, q("hover", "main.py", 5, "print(hello")), "Greet name in English.")
			contains(t, f.ok(t, map[string]any{"action": "symbols", "file": "greet.py"}), "class Greeter (line 4)", "method greet (line 7)", "function hello (line 12)")
			contains(t, f.fails(t, q("hover", "main.py", 5, "hello")), `"hello" occurs 2 times in line 5`)
			symbols := f.ok(t, map[string]any{"action": "symbols", "query": "Greeter"})
			if c.server == "pyright" {
				contains(t, symbols, "class Greeter — greet.py:4:7")
			} else {
				contains(t, symbols, "pylsp does not support workspace symbols")
			}

			orig := f.read(t, "main.py")
			bad := orig + "print(undefined_name)\n"
			rep := f.write(t, "main.py", bad)
			if rep.State != orchestrator.WriteIssues || len(rep.Diagnostics) != 1 || !strings.Contains(rep.Diagnostics[0].Message, c.undef) || rep.Diagnostics[0].Line != 6 {
				t.Fatalf("new error: got %s %+v\n%s", rep.State, rep.Diagnostics, rep.Text)
			}
			if rep = f.write(t, "main.py", "\n\n\n\n"+bad); rep.State != orchestrator.WriteClean {
				t.Errorf("moved down four lines: want clean, got %s: %s", rep.State, rep.Text)
			}
			if rep = f.write(t, "main.py", orig); rep.State != orchestrator.WriteClean {
				t.Errorf("fixed: want clean, got %s: %s", rep.State, rep.Text)
			}
			if rep = f.write(t, "main.py", bad); rep.State != orchestrator.WriteIssues {
				t.Errorf("reintroduced: want issues, got %s: %s", rep.State, rep.Text)
			}
			contains(t, f.ok(t, map[string]any{"action": "diagnostics", "file": "main.py"}), "main.py:6:7: error: "+c.undef)
			f.write(t, "main.py", orig)

			text, isErr := f.call(t, "lsp_rename", map[string]any{"file": "greet.py", "line": 12, "symbol": "def hello", "new_name": "salute"})
			if isErr {
				t.Fatal(text)
			}
			contains(t, text, c.edits...)
			contains(t, f.read(t, "main.py"), "from greet import Greeter, salute", `print(salute("again"), salute("twice"))`)
		})
	}
}

// pyright diagnoses the whole workspace (its catalog entry asks for it), so
// a changed signature is reported in a caller the server was never sent.
// Its reports on other files come in the background: the debounce here is
// long enough for them on a busy machine.
func TestPyrightCallersInUnopenedFiles(t *testing.T) {
	t.Parallel()
	conf := DefaultConfig()
	conf.Debounce = 2 * time.Second
	f := newFixture(t, "py", conf)
	greet := f.read(t, "greet.py")
	// First a write that changes nothing, so the cold server has analysed
	// the workspace before the one that breaks callers.
	if rep := f.write(t, "greet.py", greet+"\n"); rep.State != orchestrator.WriteClean {
		t.Errorf("a blank line: want clean, got %s: %s", rep.State, rep.Text)
	}
	rep := f.write(t, "greet.py", strings.Replace(greet, "def hello(name: str)", "def hello(name: str, loud: bool)", 1))
	callers := 0
	for _, d := range rep.Diagnostics {
		if d.Path == "main.py" && strings.Contains(d.Message, `Argument missing for parameter "loud"`) {
			callers++
		}
	}
	if rep.State != orchestrator.WriteIssues || callers != 3 {
		t.Errorf("signature change: want the 3 broken calls in main.py, got %s:\n%s", rep.State, rep.Text)
	}
	if rep = f.write(t, "greet.py", greet); rep.State != orchestrator.WriteClean {
		t.Errorf("signature restored: want clean, got %s: %s", rep.State, rep.Text)
	}
}
