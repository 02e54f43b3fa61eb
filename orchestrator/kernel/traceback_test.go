package kernel

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// cellPosition finds "<cell-ID>:LINE:COLUMN" in a traceback.
var cellPosition = regexp.MustCompile(`<cell-[\w-]*>:(\d+):(\d+)`)

// checkPositions says what is wrong with the cell positions of a
// traceback: each must be on a line of code, at a column within it, and
// the first must be want ("2:17").
func checkPositions(t *testing.T, code, traceback, want string) {
	t.Helper()
	lines := strings.Split(code, "\n")
	all := cellPosition.FindAllStringSubmatch(traceback, -1)
	if len(all) == 0 {
		t.Fatalf("no cell position in:\n%s", traceback)
	}
	if got := all[0][1] + ":" + all[0][2]; got != want {
		t.Errorf("the error is at %s, want %s, in:\n%s", got, want, traceback)
	}
	for _, m := range all {
		line, _ := strconv.Atoi(m[1])
		col, _ := strconv.Atoi(m[2])
		if line < 1 || line > len(lines) || col < 1 || col > len(lines[line-1]) {
			t.Errorf("position %s:%s is not in the cell, in:\n%s", m[1], m[2], traceback)
		}
	}
}

// A ToolError's stack is where the cell called tool(), without Node's
// internals (the stream and event frames that read the answer) or the
// driver's frames.
//
// Issue 11 item 13.
func TestJavaScriptToolErrorShowsTheCellNotNode(t *testing.T) {
	e := newEnv(t, testConfig(), echoHarness())
	code := "const q = 2;\nconst r = await tool(\"fail\", {})"
	r := e.eval(code, js)
	got := checkResult(t, r, true, []string{`ToolError: fail: no such tool "fail"`}, []string{"node:", "berth-driver", "Interface.emit", "Socket.emit", "[eval]"})
	checkPositions(t, code, got, "2:17")
	r = e.eval("try { await tool('rm', {}) } catch (err) { console.log(err.stack) }", js)
	got = checkResult(t, r, false, []string{"ToolError: rm: the harness refused rm"}, []string{"node:", "berth-driver"})
	if !strings.Contains(got, "<cell-") {
		t.Errorf("the stack a cell reads does not show where it called tool():\n%s", got)
	}
}

// An error in a cell that ran rewritten (top-level await, or a const or
// class made redeclarable) is reported at the cell's own line and column.
//
// Issue 11 item 13.
func TestErrorColumnsAreTheCells(t *testing.T) {
	e := newEnv(t, testConfig(), nil)
	for _, tc := range []struct{ code, at string }{
		{"const s = await Promise.resolve('x'); s.nope()", "1:41"},
		{"await 1;\n  undefinedThing + 1", "2:3"},
		{"const y = await Promise.resolve(1);\nnull.foo", "2:6"},
		{"function g() { throw new Error('in g') }\nawait 1;\ng()", "1:22"},
		{"const n = null; n.foo", "1:19"},
		{"class K { m() { return undefinedVar } }\nnew K().m()", "1:17"},
	} {
		t.Run(tc.code, func(t *testing.T) {
			r := e.eval(tc.code, js)
			got := checkResult(t, r, true, nil, []string{"(async () =>", "var n", "var K"})
			checkPositions(t, tc.code, got, tc.at)
		})
	}
}
