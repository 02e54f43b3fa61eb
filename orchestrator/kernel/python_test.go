package kernel

import (
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPythonCells runs a notebook's worth of cells on one kernel, in
// order: each case names what it shows.
func TestPythonCells(t *testing.T) {
	e := newEnv(t, testConfig(), nil)
	if err := os.Mkdir(filepath.Join(e.dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		code    string
		want    []string // substrings of the text
		notWant []string
		isError bool
		check   func(t *testing.T, text string, blocks map[string]int)
	}{
		{name: "last expression", code: "x = 41\nx + 1", want: []string{"42"}},
		{name: "state persists and _ holds the last value", code: "print(x, _)", want: []string{"41 42"}},
		{name: "no value for a statement", code: "y = 1", want: []string{"(no output)"}},
		{name: "trailing semicolon hides the value", code: "x;", want: []string{"(no output)"}},
		{name: "stdout and stderr", code: "import sys\nprint('out')\nprint('err', file=sys.stderr)", want: []string{"out\nerr\n"}},
		{name: "C-level writes to fd 1 and 2 land in the output",
			code: "import os, ctypes\nos.write(1, b'raw fd1\\n')\nlibc = ctypes.CDLL(None)\nlibc.write(1, b'libc on fd 1\\n', 13)\nlibc.write(2, b'libc on fd 2\\n', 13)\nos.system('echo from os.system')\nimport subprocess\nsubprocess.run(['echo', 'from subprocess'])\n'still talking'",
			want: []string{"raw fd1", "libc on fd 1", "libc on fd 2", "from os.system", "from subprocess", "'still talking'"}},
		{name: "stdin is /dev/null", code: "import sys\nsys.stdin.read()", want: []string{"''"}},
		{name: "traceback without driver frames", code: "def f():\n    raise ValueError('bad value')\nf()", isError: true,
			want: []string{"Traceback (most recent call last)", "<cell-", "in f", "ValueError: bad value"}, notWant: []string{"berth-driver", "berth_driver"}},
		{name: "syntax error", code: "def (", isError: true, want: []string{"SyntaxError"}, notWant: []string{"berth-driver"}},
		{name: "display html markdown json and png",
			code: "class H:\n    def _repr_html_(self): return '<b>bold</b>'\nclass M:\n    def _repr_markdown_(self): return '# Title'\nclass J:\n    def _repr_json_(self): return {'k': [1, 2]}\nimport base64\nclass P:\n    def _repr_png_(self): return base64.b64decode('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==')\ndisplay(H(), M(), J())\ndisplay(P())",
			want: []string{"<b>bold</b>", "# Title", `"k": [`},
			check: func(t *testing.T, _ string, b map[string]int) {
				if b["image"] != 1 {
					t.Errorf("want 1 image block, got %d", b["image"])
				}
			}},
		{name: "DataFrame as a table", code: "import pandas as pd\ndf = pd.DataFrame({'city': ['Oslo', 'Lima'], 'temp': [3.5, 19.0]})\ndf",
			want: []string{"city", "Oslo"},
			check: func(t *testing.T, _ string, b map[string]int) {
				if b["table"] != 1 {
					t.Errorf("want 1 table block, got %d", b["table"])
				}
			}},
		{name: "figure as PNG, then closed", code: "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('t');",
			check: func(t *testing.T, _ string, b map[string]int) {
				if b["image"] != 1 {
					t.Errorf("want 1 image block, got %d", b["image"])
				}
			}},
		{name: "no figure left over", code: "len(plt.get_fignums())", want: []string{"0"}},
		{name: "!cmd", code: "!echo shell says $((2+3))", want: []string{"shell says 5"}},
		{name: "x = !cmd", code: "lines = !printf 'a\\nb\\n'\nlines", want: []string{"['a', 'b']"}},
		{name: "%cd", code: "%cd sub\nimport os\nos.path.basename(os.getcwd())", want: []string{"'sub'"}},
		{name: "%%bash", code: "%%bash\nfor i in 1 2; do echo n$i; done", want: []string{"n1\nn2"}},
		{name: "!cmd expands {expr} and $name, leaves the shell's own", code: "word = 'py'\n!echo {word.upper()} $word $HOME_NOT_SET x | awk '{print $1}'", want: []string{"PY\n"}},
		{name: "!cmd keeps a shell variable python lacks", code: "!echo ${HOME:+home}-$PATH_NOT_SET-end", want: []string{"home--end"}},
		{name: "%%bash takes its body as typed", code: "%%bash\nword=shell\necho $word", want: []string{"shell"}},
		{name: "%timeit", code: "%timeit -n 5 -r 2 sum(range(10))", want: []string{"per loop (mean ± std. dev. of 2 runs, 5 loops each)"}},
		{name: "%%timeit", code: "%%timeit -n 3 -r 2 data = list(range(100))\nsorted(data)", want: []string{"3 loops each"}},
		{name: "an idiom inside a string literal is left alone", code: "s = '''\n!echo not run\n%cd /\n'''\ns", want: []string{`'\n!echo not run\n%cd /\n'`}, notWant: []string{"not run\n"}},
		{name: "an idiom-looking continuation is left alone", code: "v = (10\n%3)\nv", want: []string{"1"}},
		{name: "indented idiom in a block", code: "for i in range(2):\n    !echo loop\n", want: []string{"loop\nloop"}},
		{name: "%%timeit setup keeps its quotes", code: "%%timeit -n 2 -r 1 word = 'a b'\nword.split()", want: []string{"2 loops each"}},
		{name: "IPython.display shows rich objects", code: "from IPython.display import display, HTML, Markdown\ndisplay(HTML('<i>html</i>'), Markdown('*md*'))", want: []string{"<i>html</i>", "*md*"}, notWant: []string{"IPython.core.display.HTML object"}},
		{name: "unsupported magic says what is supported", code: "%load_ext foo", isError: true, want: []string{"%load_ext is not supported", "%pip"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.eval(tt.code)
			got := checkResult(t, r, tt.isError, tt.want, tt.notWant)
			if tt.check != nil {
				counts := map[string]int{}
				for _, b := range r.Content {
					counts[b.Type]++
				}
				tt.check(t, got, counts)
			}
		})
	}
}

func TestDataFrameTable(t *testing.T) {
	cfg := testConfig()
	cfg.TableRows = 3
	e := newEnv(t, cfg, nil)
	r := e.eval("import pandas as pd\npd.DataFrame({'a': range(10), 'b': [str(i) * 2 for i in range(10)]}).set_index('a')")
	tables := blocks(r, "table")
	if len(tables) != 1 {
		t.Fatalf("want one table, got:\n%+v", r.Content)
	}
	tb := tables[0]
	if strings.Join(tb.Columns, ",") != "a,b" || len(tb.Rows) != 3 || !tb.Truncated {
		t.Errorf("table: columns %v, %d rows, truncated %v; want a,b, 3 rows, truncated", tb.Columns, len(tb.Rows), tb.Truncated)
	}
	if tb.Rows[2][0] != "2" || tb.Rows[2][1] != "22" {
		t.Errorf("row 2 = %v, want [2 22]", tb.Rows[2])
	}
	if !strings.Contains(tb.Text, "22") {
		t.Errorf("the table's text fallback lacks its data: %q", tb.Text)
	}
	r = e.eval("pd.Series([1.5, 2.5], name='s')")
	if tables := blocks(r, "table"); len(tables) != 1 || strings.Join(tables[0].Columns, ",") != "s" {
		t.Errorf("a Series is a one-column table; got %+v", r.Content)
	}
}

func TestFigurePNG(t *testing.T) {
	e := newEnv(t, testConfig(), nil)
	r := e.eval("import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.bar(['a', 'b'], [1, 2])\nprint('drawn')")
	imgs := blocks(r, "image")
	if len(imgs) != 1 {
		t.Fatalf("want 1 image, got %+v", r.Content)
	}
	png, err := base64.StdEncoding.DecodeString(imgs[0].Data)
	if err != nil || !strings.HasPrefix(string(png), "\x89PNG") || imgs[0].MimeType != "image/png" {
		t.Fatalf("image is not a PNG: %v, %q", err, imgs[0].MimeType)
	}
	if strings.Contains(text(r), imgs[0].Data[:40]) {
		t.Error("image data echoed as text")
	}
}

// TestPip: %pip installs into the working directory's .venv, which the
// kernel prefers, and the next cell imports what it installed.
func TestPip(t *testing.T) {
	dir := t.TempDir()
	out, err := exec.Command(systemPython, "-m", "venv", "--system-site-packages", filepath.Join(dir, ".venv")).CombinedOutput()
	if err != nil {
		t.Fatalf("make the venv: %v\n%s", err, out)
	}
	if err := os.CopyFS(filepath.Join(dir, "pkg"), os.DirFS("testdata/pkg")); err != nil {
		t.Fatal(err)
	}
	e := newEnvIn(t, testConfig(), nil, dir)
	if got := mustOK(t, e.eval("import sys\nsys.executable")); !strings.Contains(got, "/.venv/bin/python") {
		t.Fatalf("kernel runs %s, want the workdir's .venv", got)
	}
	if r := e.eval("import berthdemo"); !r.IsError || !strings.Contains(text(r), "ModuleNotFoundError") {
		t.Fatalf("berthdemo importable before install: %s", text(r))
	}
	got := mustOK(t, e.eval("%pip install --no-index --no-build-isolation ./pkg"))
	if !strings.Contains(got, "Successfully installed berthdemo") {
		t.Fatalf("pip output:\n%s", got)
	}
	if got := mustOK(t, e.eval("import berthdemo\nberthdemo.ANSWER")); !strings.Contains(got, "installed by %pip") {
		t.Fatalf("import after %%pip: %s", got)
	}
	// !pip is the kernel's pip too, not whichever pip is first on PATH.
	if got := mustOK(t, e.eval("!pip --version")); !strings.Contains(got, "/.venv/") {
		t.Fatalf("!pip ran another environment's pip: %s", got)
	}
}

// TestPipExternallyManaged: Debian's own python refuses pip (PEP 668) and
// the cell shows pip's own message.
func TestPipExternallyManaged(t *testing.T) {
	e := newEnv(t, testConfig(), nil)
	if err := os.CopyFS(filepath.Join(e.dir, "pkg"), os.DirFS("testdata/pkg")); err != nil {
		t.Fatal(err)
	}
	got := text(e.eval("%pip install --no-index --no-build-isolation ./pkg"))
	for _, w := range []string{"externally-managed-environment", "pip exited with status"} {
		if !strings.Contains(got, w) {
			t.Errorf("output lacks %q:\n%s", w, got)
		}
	}
}

// TestForkedChildren: multiprocessing's forked children print into the
// cell and exit promptly.
func TestForkedChildren(t *testing.T) {
	e := newEnv(t, testConfig(), nil)
	code := "import multiprocessing as mp\ndef work(i):\n    print('child', i, flush=True)\n    return i * i\nwith mp.get_context('fork').Pool(2) as pool:\n    r = pool.map(work, range(4))\nr"
	start := time.Now()
	got := mustOK(t, e.eval(code))
	if !strings.Contains(got, "[0, 1, 4, 9]") || !strings.Contains(got, "child 3") {
		t.Errorf("multiprocessing cell: %s", got)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("multiprocessing cell took %s", d)
	}
}
