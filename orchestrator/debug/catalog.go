package debug

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// found is what detection found for one adapter, for one program (or the
// working directory's top when there is none). The adapter is usable
// only when both halves were found: the intersection rule.
type found struct {
	adapter *Adapter
	root    string // directory holding the marker, "" if none
	marker  string // the marker found
	exe     string // the adapter's executable (for python adapters, the interpreter)
	// noMarker and noExe say why a half is missing, "" when found.
	noMarker string
	noExe    string
}

func (f found) usable() bool { return f.noMarker == "" && f.noExe == "" }

// why is one sentence on what is missing.
func (f found) why() string {
	var parts []string
	if f.noMarker != "" {
		parts = append(parts, f.noMarker)
	}
	if f.noExe != "" {
		parts = append(parts, f.noExe)
	}
	return strings.Join(parts, "; ")
}

// detect looks for the adapter's root marker from dir up to the working
// directory, and for its executable in the run's enclosure.
func (p *Provider) detect(ctx context.Context, run *orchestrator.Run, a *Adapter, dir string) found {
	f := found{adapter: a}
	f.root, f.marker = findMarker(run.Workdir, dir, a.Markers)
	if f.root == "" {
		where := "at the top of the working directory"
		if dir != run.Workdir {
			where = fmt.Sprintf("from %s up to the working directory", workspace.Rel(run.Workdir, dir))
		}
		f.noMarker = fmt.Sprintf("no root marker (%s) %s", strings.Join(a.Markers, ", "), where)
	}
	f.exe, f.noExe = p.executable(ctx, run, a)
	return f
}

// findMarker returns the nearest directory at or above dir, inside root,
// holding one of markers.
func findMarker(root, dir string, markers []string) (string, string) {
	for d := dir; ; d = filepath.Dir(d) {
		for _, m := range markers {
			if _, err := os.Stat(filepath.Join(d, m)); err == nil {
				return d, m
			}
		}
		if d == root || !strings.HasPrefix(d, root+string(filepath.Separator)) {
			return "", ""
		}
	}
}

// executable resolves the adapter's executable, or says why it cannot.
func (p *Provider) executable(ctx context.Context, run *orchestrator.Run, a *Adapter) (string, string) {
	if a.Interpreter != "" {
		return p.interpreter(ctx, run, a)
	}
	for _, name := range a.Executables {
		path, err := run.Enclosure.LookPath(ctx, name)
		if err == nil {
			return path, ""
		}
		if enclosure.Down(err) {
			return "", enclosure.Say(err) // the container, not the adapter (issue 24 item 11)
		}
	}
	return "", fmt.Sprintf("executable not found: none of %s is on the %s enclosure's PATH; install it there or set debug.adapters[%s].executables",
		strings.Join(a.Executables, ", "), run.Enclosure.Driver(), a.ID)
}

// venvPythons are the project-local interpreters preferred over PATH: a
// PATH python is a different environment, and debugging from the wrong
// one fails in a way that reads like broken code.
var venvPythons = []string{".venv/bin/python", "venv/bin/python"}

// interpreter picks the workdir's venv python, else the configured one,
// and checks that the adapter's module imports in it.
func (p *Provider) interpreter(ctx context.Context, run *orchestrator.Run, a *Adapter) (string, string) {
	path := ""
	for _, v := range venvPythons {
		host := filepath.Join(run.Workdir, v)
		if st, err := os.Stat(host); err == nil && !st.IsDir() {
			mapped, err := run.Enclosure.MapPath(host)
			if err == nil {
				path = mapped
				break
			}
		}
	}
	if path == "" {
		lp, err := run.Enclosure.LookPath(ctx, p.cfg.Python)
		if enclosure.Down(err) {
			return "", enclosure.Say(err) // the container, not the interpreter (issue 24 item 11)
		}
		if err != nil {
			return "", fmt.Sprintf("no interpreter: the working directory has no .venv/bin/python or venv/bin/python and %s is not on the PATH (set debug.python)", p.cfg.Python)
		}
		path = lp
	}
	if a.Module == "" {
		return path, ""
	}
	if msg := p.imports(ctx, run, path, a.Module); msg != "" {
		return "", msg
	}
	return path, ""
}

// imports checks that module imports in the interpreter; a success is
// remembered for the interpreter, so launches do not pay for it again.
func (p *Provider) imports(ctx context.Context, run *orchestrator.Run, python, module string) string {
	key := run.Enclosure.Driver() + "\x00" + run.Enclosure.ID() + "\x00" + python + "\x00" + module
	p.mu.Lock()
	ok := p.imported[key]
	p.mu.Unlock()
	if ok {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	dir, err := run.Enclosure.MapPath(run.Workdir)
	if err != nil {
		return fmt.Sprintf("%s cannot be started: %v", python, err)
	}
	stderr := enclosure.NewTail(4 << 10)
	proc, err := run.Enclosure.Start(ctx, enclosure.Cmd{Path: python, Args: []string{"-c", "import " + module}, Dir: dir, Stderr: stderr})
	if enclosure.Down(err) {
		return enclosure.Say(err)
	}
	if err != nil {
		return fmt.Sprintf("%s cannot be started: %v", python, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = proc.Kill() })
	defer stop()
	code, err := proc.Wait()
	if enclosure.Down(err) {
		return enclosure.Say(err)
	}
	if err != nil || code != 0 {
		last := text.Line(lastLine(stderr.String()))
		return fmt.Sprintf("%s is not importable in %s (%s): install it there, or set debug.python to an interpreter that has it", module, python, last)
	}
	p.mu.Lock()
	p.imported[key] = true
	p.mu.Unlock()
	return ""
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if s == "" {
		return "no error message"
	}
	return s
}
