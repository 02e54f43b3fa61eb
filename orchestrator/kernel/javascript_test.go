package kernel

import (
	"strings"
	"testing"
	"time"
)

func TestJavaScriptCells(t *testing.T) {
	cfg := testConfig()
	cfg.CellIdleBudget = time.Second
	e := newEnv(t, cfg, nil)
	tests := []struct {
		name, code string
		want       []string
		notWant    []string
		isError    bool
		images     int
	}{
		{name: "last expression", code: "var a = 40; a + 2", want: []string{"42"}},
		{name: "state persists, _ holds the last value", code: "[a, _]", want: []string{"[ 40, 42 ]"}},
		{name: "console.log captured", code: "console.log('hello', {k: 1}); console.error('warn'); process.stdout.write('raw\\n')", want: []string{"hello { k: 1 }\nwarn\nraw\n"}},
		{name: "top-level await with declarations that persist", code: "const v = await new Promise(r => setTimeout(() => r(5), 10)); v * 2", want: []string{"10"}},
		{name: "awaited declaration persists", code: "v + 1", want: []string{"6"}},
		{name: "display", code: "display({'text/markdown': '# Title'}, {raw: true}); display([1, 2]); 'end'", want: []string{"# Title", "[ 1, 2 ]", "'end'"}},
		{name: "display a PNG", code: "display({'image/png': 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=='}, {raw: true})", images: 1},
		{name: "require from the context", code: "const path = require('path'); path.basename('/a/b.txt')", want: []string{"'b.txt'"}},
		{name: "error with a clean stack", code: "function f() { throw new TypeError('bad type') }\nf()", isError: true, want: []string{"TypeError", "bad type", "<cell-"}, notWant: []string{"berth-driver", "node:vm"}},
		{name: "a child writing to fd 1 lands in the output", code: "require('child_process').spawnSync('echo', ['inherited stdio'], {stdio: 'inherit'}); 'after'", want: []string{"inherited stdio", "'after'"}},
		{name: "fd 1 and 2 block, so an inheriting child's writes wait instead of failing",
			code: "[1, 2].map(fd => parseInt(require('fs').readFileSync('/proc/self/fdinfo/' + fd, 'utf8').match(/flags:\\s+(\\d+)/)[1], 8) & 0o4000)", want: []string{"[ 0, 0 ]"}},
		{name: "a child inheriting stdin reads /dev/null, not the frames", code: "require('child_process').spawnSync('cat', [], {stdio: 'inherit'}); 'after cat'", want: []string{"'after cat'"}},
		{name: "unhandled rejection does not kill the kernel", code: "Promise.reject(new Error('nobody listens')); await new Promise(r => setTimeout(r, 20)); 'alive'", want: []string{"'alive'"}},
		{name: "a cell with top-level const and class runs again", code: "const k = 1\nclass Box { get v() { return k } }\nnew Box().v", want: []string{"1"}},
		{name: "and again", code: "const k = 2\nclass Box { get v() { return k * 10 } }\nnew Box().v", want: []string{"20"}},
		{name: "a silent synchronous loop is interrupted", code: "while (true) {}", isError: true, want: []string{"Interrupted", "no output for 1s"}},
		{name: "a silent await is interrupted", code: "await new Promise(() => {})", isError: true, want: []string{"Interrupted"}},
		{name: "still alive after interrupts", code: "a", want: []string{"40"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.eval(tt.code, js)
			checkResult(t, r, tt.isError, tt.want, tt.notWant)
			if n := len(blocks(r, "image")); n != tt.images {
				t.Errorf("%d images, want %d", n, tt.images)
			}
		})
	}
}

func TestJavaScriptDyingKernel(t *testing.T) {
	e := newEnv(t, testConfig(), nil)
	mustOK(t, e.eval("var state = 1", js))
	r := e.eval("process.exit(4)", js)
	if !r.IsError || !strings.Contains(text(r), "exited with status 4") {
		t.Fatalf("dying node kernel: %s", text(r))
	}
	if got := mustOK(t, e.eval("typeof state", js)); got != "'undefined'" {
		t.Errorf("next call did not get a fresh kernel: %s", got)
	}
}
