package lsp

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// checker runs the project checker of every catalog entry in each of its
// outermost roots in the workdir (diagnostics "*"), in the run's
// enclosure, and lists what it reports as path:line:col: message.
func (p *Provider) checker(ctx context.Context, run *orchestrator.Run) *orchestrator.Result {
	var out []string
	var why []string
	ran := map[string]bool{}
	var all []string
	for _, sc := range p.conf.Servers {
		all = append(all, sc.RootMarkers...)
	}
	dirs := workspace.MarkerDirs(run.Workdir, all, maxMarkerDirs)
	for _, sc := range p.conf.Servers {
		if len(sc.Checker) == 0 {
			continue
		}
		key := strings.Join(sc.Languages, ",")
		if ran[key] {
			continue // one checker per language (pyright before pylsp)
		}
		roots := outermost(rootsOf(sc, dirs))
		if len(roots) == 0 {
			why = append(why, fmt.Sprintf("%s: no root marker (%s) in the workdir", sc.Name, strings.Join(sc.RootMarkers, ", ")))
			continue
		}
		if _, err := run.Enclosure.LookPath(ctx, sc.Checker[0]); err != nil {
			why = append(why, fmt.Sprintf("%s: checker %q not found in the %s enclosure", sc.Name, sc.Checker[0], run.Enclosure.Driver()))
			continue
		}
		ran[key] = true
		for i, r := range roots {
			if i == maxCheckerRoots {
				out = append(out, fmt.Sprintf("(%s: %d more root(s) not checked: %s; pass one of their files to diagnostics)",
					checkerName(sc), len(roots)-i, strings.Join(roots[i:], ", ")))
				break
			}
			out = append(out, p.runChecker(ctx, run, sc, r))
		}
	}
	if len(out) == 0 {
		return orchestrator.Errorf("no project checker can run for the workdir:\n  %s\nPass a file to diagnostics instead.", strings.Join(why, "\n  "))
	}
	return orchestrator.Text(strings.Join(out, "\n\n"))
}

// runChecker runs one project checker in the workdir (runCheck) and
// returns its problems as path:line:col: message lines under a head line
// with its exit code, or its raw output when it failed without a
// parseable problem.
func (p *Provider) runChecker(ctx context.Context, run *orchestrator.Run, sc ServerConfig, root string) string {
	r := p.runCheck(ctx, run, sc, root)
	if r.err != nil {
		return fmt.Sprintf("%s %v", r.cmdline, r.err)
	}
	found := r.problems
	head := fmt.Sprintf("%s (exit %d): %d problem(s)", r.cmdline, r.code, len(found))
	if r.cut {
		head += fmt.Sprintf(" (its output passed %d MiB, and only that much of it was read: run it yourself for all of it)", checkerOutputBytes>>20)
	}
	if r.stopped {
		head = fmt.Sprintf("%s was stopped after %s: %d problem(s) before that", r.cmdline, p.conf.CheckerTimeout, len(found))
	}
	if len(found) > maxFileDiagnostics {
		head += fmt.Sprintf(", showing %d", maxFileDiagnostics)
		found = found[:maxFileDiagnostics]
	}
	if r.failed() {
		return head + "; its output:\n" + r.output
	}
	var b strings.Builder
	b.WriteString(head)
	for _, f := range found {
		b.WriteString("\n" + f.String())
	}
	return b.String()
}

// checkerName names sc's checker in reports: its checker_name, else
// its command line.
func checkerName(sc ServerConfig) string {
	if sc.CheckerName != "" {
		return sc.CheckerName
	}
	return strings.Join(sc.Checker, " ")
}

// checkRun is what one run of a project checker found.
type checkRun struct {
	cmdline  string // the checker's name (checkerName), and the root it ran in when not the workdir
	err      error  // it could not run at all (the error says so after cmdline)
	code     int
	problems []checkProblem
	output   string // the tail of its output, when it failed without a parseable problem
	cut      bool   // its output passed checkerOutputBytes
	stopped  bool   // it ran past CheckerTimeout, or the call ended
}

// failed says the checker ran and failed without saying where: a
// broken setup rather than problems in the code.
func (r checkRun) failed() bool { return r.err == nil && len(r.problems) == 0 && r.code != 0 }

// checkProblem is one problem a checker reported, its path relative to
// the workdir.
type checkProblem struct {
	path      string
	line, col int
	msg       string
}

func (c checkProblem) String() string {
	return fmt.Sprintf("%s:%d:%d: %s", c.path, c.line, c.col, c.msg)
}

// runCheck runs one project checker of sc in root (relative to the
// workdir) in the run's enclosure, within CheckerTimeout.
func (p *Provider) runCheck(ctx context.Context, run *orchestrator.Run, sc ServerConfig, root string) checkRun {
	ctx, cancel := context.WithTimeout(ctx, p.conf.CheckerTimeout)
	defer cancel()
	r := checkRun{cmdline: checkerName(sc)}
	if root != "." {
		r.cmdline += " in " + root
	}
	dir, err := run.Enclosure.MapPath(filepath.Join(run.Workdir, filepath.FromSlash(root)))
	if err != nil {
		r.err = fmt.Errorf("cannot run: %w", err)
		return r
	}
	if _, err := run.Enclosure.LookPath(ctx, sc.Checker[0]); err != nil {
		if enclosure.Down(err) {
			// The container or its engine, not the checker: its error
			// says what to do.
			r.err = fmt.Errorf("cannot run %q: %s", sc.Checker[0], enclosure.Say(err))
		} else {
			r.err = fmt.Errorf("cannot run: %q is not found in the %s enclosure", sc.Checker[0], run.Enclosure.Driver())
		}
		return r
	}
	stderr := enclosure.NewTail(checkerOutputBytes)
	proc, err := run.Enclosure.Start(ctx, enclosure.Cmd{Path: sc.Checker[0], Args: sc.Checker[1:], Dir: dir, Stderr: stderr})
	if err != nil {
		r.err = fmt.Errorf("could not start: %w", err)
		return r
	}
	proc.Stdin().Close()
	stop := context.AfterFunc(ctx, func() { _ = proc.Kill() })
	stdout, _ := io.ReadAll(io.LimitReader(proc.Stdout(), checkerOutputBytes))
	_, _ = io.Copy(io.Discard, proc.Stdout()) // the rest: the checker must not block on a full pipe
	r.code, _ = proc.Wait()
	stop()
	r.problems = parseChecker(string(stdout)+"\n"+stderr.String(), run.Workdir, run.Enclosure.HostPath, root)
	_, dropped := stderr.Snapshot()
	r.cut = dropped > 0 || len(stdout) == checkerOutputBytes
	r.stopped = ctx.Err() != nil
	if r.failed() {
		tail := strings.TrimSpace(string(stdout) + "\n" + stderr.String())
		if len(tail) > 2000 {
			tail = "…" + tail[len(tail)-2000:]
		}
		r.output = tail
	}
	return r
}

// Checker output forms: "path:line:col: msg" (go vet, cargo --message-format
// short, cc, pyflakes), "  path:line:col - error: msg" (pyright),
// "path(line,col): error TS…: msg" (tsc) and "error - path:line:col - msg"
// (dart analyze).
var checkerForms = []*regexp.Regexp{
	regexp.MustCompile(`^\s*(?:error|warning|info) - (\S+?):(\d+):(\d+) - (.*)$`),
	regexp.MustCompile(`^\s*(\S+?):(\d+):(\d+) - (.*)$`),
	regexp.MustCompile(`^\s*(\S+?)\((\d+),(\d+)\): (.*)$`),
	regexp.MustCompile(`^(?:vet: )?(\S+?):(\d+):(?:(\d+):)? ?(.*)$`),
}

// parseChecker finds path:line:col: message lines in a checker's output
// (checkerForms), with paths made relative to the workdir: an absolute
// path as the enclosure sees it (hostPath maps it back to the host's), or
// one relative to root, where the checker ran.
func parseChecker(out, workdir string, hostPath func(string) (string, error), root string) []checkProblem {
	var res []checkProblem
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, re := range checkerForms {
			m := re.FindStringSubmatch(line)
			if m == nil || !strings.Contains(filepath.Base(m[1]), ".") {
				continue
			}
			path := m[1]
			if filepath.IsAbs(path) {
				if hp, err := hostPath(path); err == nil {
					path = workspace.Rel(workdir, hp)
				}
			} else {
				path = filepath.ToSlash(filepath.Join(filepath.FromSlash(root), path))
			}
			ln, _ := strconv.Atoi(m[2])
			col := 1
			if m[3] != "" {
				col, _ = strconv.Atoi(m[3])
			}
			res = append(res, checkProblem{path: path, line: ln, col: col, msg: strings.TrimSpace(m[4])})
			break
		}
	}
	return res
}

// maxCheckerRoots caps how many roots of one entry diagnostics "*" checks:
// each checker can take minutes.
const maxCheckerRoots = 5

// maxMarkerDirs bounds the directories walked to find roots.
const maxMarkerDirs = workspace.MaxMarkerDirs

// rootsOf lists the directories (relative to the workdir) holding one of
// the entry's root markers.
func rootsOf(sc ServerConfig, dirs map[string][]string) []string {
	var roots []string
	for _, mk := range sc.RootMarkers {
		for _, d := range dirs[mk] {
			if !slices.Contains(roots, d) {
				roots = append(roots, d)
			}
		}
	}
	slices.Sort(roots)
	return roots
}

// outermost drops the roots inside another one of the list: a checker run
// in a root covers the projects below it, or reports them itself.
func outermost(roots []string) []string {
	var out []string
	for _, r := range roots { // sorted: a root comes before those inside it
		inside := false
		for _, o := range out {
			if o == "." || strings.HasPrefix(r, o+"/") {
				inside = true
				break
			}
		}
		if !inside {
			out = append(out, r)
		}
	}
	return out
}

// checkerOutputBytes bounds what is kept of a checker's stdout, and of
// its stderr: a broken project can make a checker print without end.
const checkerOutputBytes = 4 << 20
