package lsp

import (
	"strings"
	"testing"
)

// What a server names is shown so that it cannot pass for Berth's own
// answer (issue 24 item 6): a path with a newline in it
// ("a.fake%0A/etc/passwd" in its URI) is quoted instead of printing a line
// that reads /etc/passwd:1:1; a symbol's name keeps to its line; a
// diagnostic's message of many lines has its later lines indented; an
// escape sequence or a carriage return in a hover is escaped. The fake
// server (testdata/fakelsp -mode hostile-names) names them.
func TestServerNamedPathsAndMessagesCannotForgeLines(t *testing.T) {
	f := newFixture(t, "fake", fakeConfig("-mode", "hostile-names"))
	forged := func(what, text string) {
		t.Helper()
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, "/etc/passwd") {
				t.Errorf("%s: a line reads %q, forged by the server:\n%s", what, line, text)
			}
		}
		if strings.ContainsAny(text, "\x1b\r") {
			t.Errorf("%s holds the server's raw control characters: %q", what, text)
		}
	}

	refs := f.ok(t, map[string]any{"action": "references", "file": "a.fake", "line": 1, "symbol": "hello"})
	forged("references", refs)
	contains(t, refs, `"a.fake\n/etc/passwd":1:1`)

	syms := f.ok(t, map[string]any{"action": "symbols", "query": "evil", "file": "a.fake"})
	forged("workspace symbols", syms)
	contains(t, syms, `evil\n/etc/passwd:1:1: fake`, `"a.fake\n/etc/passwd":1:1`)

	hover := f.ok(t, map[string]any{"action": "hover", "file": "a.fake", "line": 1, "symbol": "hello"})
	forged("hover", hover)
	contains(t, hover, `hover\x1b[2J\rwiped`)

	diags := f.ok(t, map[string]any{"action": "diagnostics", "file": "a.fake"})
	forged("diagnostics", diags)
	contains(t, diags, "a.fake:1:1: error: bad\n    /etc/passwd:1:1: error: forged\\x1b[2J [c\\nd]")

	rep := f.write(t, "a.fake", "hello fake\nchanged\n")
	forged("files/didWrite", rep.Text)
}
