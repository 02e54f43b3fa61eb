package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-dev/berth/orchestrator"
)

// An interrupted cell in a container ends the processes it started and
// left running, before its result says the kernel is intact (issue 24
// item 7: a fork bomb's 247 children held the container's pid limit
// until the run ended). The cell starts 50, bounded: 40 sleepers that
// ignore SIGINT in the kernel's group, 5 forked copies of the kernel that
// ignore it too, and 5 that left the group (setsid); then it is silent
// past the idle budget.
func TestContainersInterruptEndsStrayProcesses(t *testing.T) {
	s := inContainer(fullImage).fresh(t)
	c := startFamilies(t, family{config: kernelsSection})
	run := s.start(t, c, nil)
	sleepers := func() []string {
		var out []string
		for _, p := range s.processes(t) {
			if strings.Contains(p, "sleep 30") || strings.Contains(p, "defunct") {
				out = append(out, p)
			}
		}
		return out
	}
	cells := []struct{ lang, code string }{
		{"python", `import os, signal, subprocess, time
subprocess.Popen(['/bin/sh', '-c', 'for i in $(seq 40); do sleep 300 & done'], stdout=subprocess.DEVNULL).wait()
subprocess.Popen(['/bin/sh', '-c', 'for i in $(seq 5); do setsid sleep 301 & done'], stdout=subprocess.DEVNULL).wait()
for i in range(5):
    if os.fork() == 0:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        os.execvp('sleep', ['sleep', '302'])
print('started', flush=True)
time.sleep(60)`},
		{"javascript", `require('child_process').spawnSync('/bin/sh', ['-c', 'for i in $(seq 45); do sleep 300 & done; for i in $(seq 5); do setsid sleep 301 & done'], {stdio: 'ignore'});
console.log('started');
await new Promise(() => {});`},
	}
	for _, cell := range cells {
		res := evalCell(t, c, run, cell.lang, cell.code)
		got := text(res)
		if !res.IsError || !strings.Contains(got, "started") || !strings.Contains(got, "intact") || !strings.Contains(got, "ended 50 processes") {
			t.Errorf("%s: the interrupted cell's result:\n%s", cell.lang, got)
		}
		left := sleepers()
		t.Logf("%s: processes the interrupted cell left in the container: %d", cell.lang, len(left))
		if len(left) != 0 {
			t.Errorf("%s: %d of the cell's processes outlived its interrupt: %v", cell.lang, len(left), left)
		}
	}
	if res := evalCell(t, c, run, "python", "'alive'"); res.IsError || text(res) != "'alive'" {
		t.Errorf("the kernel after the interrupt: %s", text(res))
	}
	if err := c.StopRun(testCtx(t), run); err != nil {
		t.Fatal(err)
	}
	s.waitNoProcesses(t, "run/stop")
}

// In berth/full, which has no IPython and no pip, a cell's "from
// IPython.display import display, Markdown, HTML, Image" works, pandas,
// matplotlib and tqdm.auto act as they do without IPython (tqdm, pure
// Python, is copied from the host into the workdir, where the kernel
// imports from), and %pip says that pip is missing and what to do
// instead (issue 24 item 17).
func TestContainersIPythonDisplayWithoutIPython(t *testing.T) {
	s := inContainer(fullImage).fresh(t)
	if out, err := s.command("python3", "-c", "import IPython").CombinedOutput(); err == nil {
		t.Fatalf("%s has IPython: this test is for an image without it", fullImage)
	} else if !strings.Contains(string(out), "No module named 'IPython'") {
		t.Fatalf("python3 -c 'import IPython' in %s: %v\n%s", fullImage, err, out)
	}
	if err := os.CopyFS(filepath.Join(s.Dir, "tqdm"), os.DirFS("/usr/lib/python3/dist-packages/tqdm")); err != nil {
		t.Fatalf("copy tqdm (python3-tqdm, scripts/setup installs it): %v", err)
	}
	// matplotlib's first import in a fresh container builds its font
	// cache, silent for longer than kernelsSection's 3s budget.
	c := startFamilies(t, family{config: map[string]any{"kernels": map[string]any{"python": "/usr/bin/python3", "cell_idle_budget": "60s"}}})
	run := s.start(t, c, nil)

	res := evalCell(t, c, run, "python", "from IPython.display import display, Markdown, HTML, Image\n"+
		"import base64\n"+
		"png = base64.b64decode('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==')\n"+
		"display(HTML('<b>bold</b>'), Markdown('*md*'), Image(png))")
	got := text(res)
	if res.IsError || !strings.Contains(got, "<b>bold</b>") || !strings.Contains(got, "*md*") || strings.Contains(got, "object>") {
		t.Errorf("IPython.display in %s:\n%s", fullImage, got)
	}
	if n := len(blocksOf(res, "image")); n != 1 {
		t.Errorf("%d images, want the 1 displayed", n)
	}

	// The kernel package's probe of what the libraries decide.
	b, err := os.ReadFile("../orchestrator/kernel/testdata/library_probe.py")
	if err != nil {
		t.Fatal(err)
	}
	probe := string(b)
	with := evalCell(t, c, run, "python", probe)
	without := callTool(t, c, run, "eval", map[string]any{"code": probe, "language": "python", "reset": true, "description": "probe the libraries in a fresh kernel"})
	if with.IsError || without.IsError || text(with) != text(without) || !strings.Contains(text(with), "IPython loaded: False") {
		t.Errorf("the libraries with the stand-in imported:\n%s\nand without:\n%s", text(with), text(without))
	}
	t.Logf("the libraries, with the stand-in as without it:\n%s", text(with))

	res = evalCell(t, c, run, "python", "%pip install requests")
	if got := text(res); !res.IsError || !strings.Contains(got, "pip is not installed") || !strings.Contains(got, "apt-get install") {
		t.Errorf("%%pip without pip:\n%s", got)
	}
	if err := c.StopRun(testCtx(t), run); err != nil {
		t.Fatal(err)
	}
	s.waitNoProcesses(t, "run/stop")
}

// blocksOf is the result's blocks of one type.
func blocksOf(r *orchestrator.Result, typ string) []orchestrator.Block {
	var out []orchestrator.Block
	for _, b := range r.Content {
		if b.Type == typ {
			out = append(out, b)
		}
	}
	return out
}
