package kernel

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// pythonWithoutIPython makes an interpreter as the images have it:
// Debian's python3 with pandas, matplotlib and tqdm but no IPython (and no
// pip). It is a virtual environment without the system's packages
// (python3 -m venv --without-pip) whose one .pth names a folder of links
// to each entry of Debian's dist-packages but IPython's, its kernel's and
// pip's.
// The host's /usr/bin/python3 has IPython (scripts/setup installs
// ipykernel), so it cannot stand for the images.
func pythonWithoutIPython(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	venv := filepath.Join(dir, "venv")
	if out, err := exec.Command(systemPython, "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		t.Fatalf("make the venv: %v\n%s", err, out)
	}
	pkgs := filepath.Join(dir, "dist-packages")
	if err := os.Mkdir(pkgs, 0o755); err != nil {
		t.Fatal(err)
	}
	const dist = "/usr/lib/python3/dist-packages"
	entries, err := os.ReadDir(dist)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if n := strings.ToLower(e.Name()); strings.HasPrefix(n, "ipython") || strings.HasPrefix(n, "ipykernel") || n == "pip" || strings.HasPrefix(n, "pip-") {
			continue
		}
		if err := os.Symlink(filepath.Join(dist, e.Name()), filepath.Join(pkgs, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	site, err := filepath.Glob(filepath.Join(venv, "lib", "python3*", "site-packages"))
	if err != nil || len(site) != 1 {
		t.Fatalf("the venv's site-packages: %v %v", site, err)
	}
	if err := os.WriteFile(filepath.Join(site[0], "debian.pth"), []byte(pkgs+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	python := filepath.Join(venv, "bin", "python")
	probe := "import importlib.util as u; assert u.find_spec('IPython') is None and u.find_spec('pip') is None; import pandas, matplotlib, tqdm"
	if out, err := exec.Command(python, "-c", probe).CombinedOutput(); err != nil {
		t.Fatalf("%s is not python with pandas, matplotlib and tqdm and without IPython and pip (python3-tqdm is in scripts/setup): %v\n%s", python, err, out)
	}
	return python
}

// tinyPNG is a 2x2 PNG.
func tinyPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Where the interpreter has no IPython, a cell's "from IPython.display
// import display, Markdown, HTML, Image" works as it does with IPython,
// in each way of importing it (issue 24 item 17); a name the stand-in
// lacks is refused with what it has, and IPython itself stays absent.
func TestIPythonDisplayWithoutIPython(t *testing.T) {
	cfg := testConfig()
	cfg.Python = pythonWithoutIPython(t)
	e := newEnv(t, cfg, nil)
	if err := os.WriteFile(filepath.Join(e.dir, "dot.png"), tinyPNG(t), 0o644); err != nil {
		t.Fatal(err)
	}
	pngB64 := base64.StdEncoding.EncodeToString(tinyPNG(t))

	r := e.eval("from IPython.display import display, Markdown, HTML, Image\n" +
		"display(HTML('<b>bold</b>'), Markdown('*md*'))\n" +
		"display(Image(filename='dot.png'))\n" +
		"Image(open('dot.png', 'rb').read())")
	got := checkResult(t, r, false, []string{"<b>bold</b>", "*md*"}, []string{"object>", "Error"})
	imgs := blocks(r, "image")
	if len(imgs) != 2 {
		t.Fatalf("%d images, want 2 (a file's, and bytes'):\n%s", len(imgs), got)
	}
	for _, b := range imgs {
		if b.Data != pngB64 || b.MimeType != "image/png" {
			t.Errorf("image %s is not the PNG shown", b.MimeType)
		}
	}
	for _, tc := range []struct{ name, code, want string }{
		{"module as a name", "import IPython.display as ipd\nipd.display(ipd.HTML('<i>as ipd</i>'))", "<i>as ipd</i>"},
		{"module from IPython", "from IPython import display\ndisplay.display(display.Markdown('**from IPython**'))", "**from IPython**"},
		{"the package's attribute", "import IPython.display\nIPython.display.display(IPython.display.HTML('<u>dotted</u>'))", "<u>dotted</u>"},
		{"IPython.core.display", "from IPython.core.display import HTML as H\nH('<s>core</s>')", "<s>core</s>"},
		{"star", "from IPython.display import *\nMarkdown('# star')", "# star"},
		{"inside a function", "def show(x):\n    from IPython.display import display, HTML\n    display(HTML(x))\nshow('<em>in def</em>')", "<em>in def</em>"},
		{"a URL image is not fetched", "from IPython.display import Image\nImage(url='http://example.invalid/a.png')", `<img src="http://example.invalid/a.png"/>`},
	} {
		t.Run(tc.name, func(t *testing.T) { checkResult(t, e.eval(tc.code), false, []string{tc.want}, nil) })
	}
	checkResult(t, e.eval("from IPython.display import Video"), true,
		[]string{"cannot import name 'Video' from IPython.display", "IPython is not installed", "display, Markdown, HTML, Image"}, nil)
	checkResult(t, e.eval("import IPython"), true, []string{"No module named 'IPython'"}, nil)
	checkResult(t, e.eval("import sys\nsorted(m for m in sys.modules if m.lower().startswith('ipython'))"), false, []string{"[]"}, nil)
}

// libraryProbe is testdata/library_probe.py: what pandas, matplotlib and
// tqdm decide from whether IPython is there.
func libraryProbe(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("testdata/library_probe.py")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The stand-in leaves pandas, matplotlib and tqdm.auto as they are
// without IPython: the same probe answers alike in a kernel that has
// imported the stand-in and in one that has not (issue 24 item 17).
func TestIPythonStandInLeavesLibrariesAsWithoutIPython(t *testing.T) {
	cfg := testConfig()
	cfg.Python = pythonWithoutIPython(t)
	e := newEnv(t, cfg, nil)
	without := mustOK(t, e.eval(libraryProbe(t)))
	for _, w := range []string{"tqdm.auto: tqdm.asyncio.tqdm_asyncio", "pandas front end: False", "IPython loaded: False"} {
		if !strings.Contains(without, w) {
			t.Errorf("without the stand-in the probe lacks %q:\n%s", w, without)
		}
	}
	mustOK(t, e.eval("from IPython.display import display, Markdown, HTML, Image", reset))
	with := mustOK(t, e.eval(libraryProbe(t)))
	if with != without {
		t.Errorf("the libraries act differently once the stand-in is imported:\nwith:\n%s\nwithout:\n%s", with, without)
	}
	// A DataFrame and a figure still come back as a table and an image.
	r := e.eval("df = pd.DataFrame({'a': [1, 2]})\ndisplay(df)\nplt.plot([1, 2]);")
	if len(blocks(r, "image")) != 1 || !strings.Contains(text(r), "a") || r.IsError {
		t.Errorf("table and figure after the stand-in: %d images\n%s", len(blocks(r, "image")), text(r))
	}
}

// %pip where the interpreter has no pip says so and what to do instead
// (issue 24 item 17), rather than "No module named pip".
func TestPipMissingSaysWhatToDo(t *testing.T) {
	cfg := testConfig()
	cfg.Python = pythonWithoutIPython(t)
	e := newEnv(t, cfg, nil)
	for _, code := range []string{"%pip install requests", "!pip install requests"} {
		checkResult(t, e.eval(code), true, []string{"pip is not installed for this kernel's interpreter", "apt-get install", ".venv"}, []string{"No module named pip"})
	}
}
