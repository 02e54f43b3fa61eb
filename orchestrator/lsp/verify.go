package lsp

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// A rename is checked after it is written the way a user would check it:
// the project checker runs (before and after, so only what is new is
// reported), the language server diagnoses the written files, and the
// files of the server's languages are searched for the old name. A server
// can answer a rename in part and look whole (tsserver did, while it was
// loading the project); only these checks show it.

// pendingCheck is a project checker running in the background.
type pendingCheck struct {
	done   chan struct{}
	cancel context.CancelFunc
	res    checkRun
}

// startCheck starts s's project checker in s's root; nil when its entry
// has none.
func (p *Provider) startCheck(ctx context.Context, run *orchestrator.Run, s *server) *pendingCheck {
	if len(s.cfg.Checker) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	pc := &pendingCheck{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(pc.done)
		pc.res = p.runCheck(ctx, run, s.cfg, workspace.Rel(run.Workdir, s.paths.root))
	}()
	return pc
}

// wait returns the checker's run once it has ended (nil for none).
func (pc *pendingCheck) wait() *checkRun {
	if pc == nil {
		return nil
	}
	<-pc.done
	return &pc.res
}

// stop ends the checker, if it still runs, and waits for it.
func (pc *pendingCheck) stop() {
	if pc != nil {
		pc.cancel()
		<-pc.done
	}
}

// verification is what checking a written rename found.
type verification struct {
	langs    string // the server's languages, "typescript/javascript"
	checker  string // the checker's name (checkerName); "" when it did not run
	problems []checkProblem
	fresh    []diag   // new problems the language server reported
	notes    []string // what could not be checked, and why
	name     string   // the old name
	left     []string // where it still occurs, as locations
	leftN    int      // how often it still occurs
}

// verify checks a rename written to paths: baseline is the checker's run
// before the write (nil when s's entry has none), old the renamed name.
func (p *Provider) verify(ctx context.Context, run *orchestrator.Run, s *server, paths []string, baseline *checkRun, old string) verification {
	v := verification{langs: strings.Join(s.cfg.Languages, "/"), name: old}
	fresh, unknown := p.check(ctx, run, s, paths)
	v.fresh = fresh
	if baseline == nil {
		v.notes = append(v.notes, fmt.Sprintf("no project checker is configured for %s (lsp.servers[].checker), so only the written files were diagnosed", s.cfg.Name))
		v.notes = append(v.notes, unknown...)
		if openFilesOnly[filepath.Base(s.cfg.Command[0])] {
			v.notes = append(v.notes, fmt.Sprintf("%s reports only on files it has open: other files that use the old name were not diagnosed", s.cfg.Name))
		}
	} else {
		after := p.runCheck(ctx, run, s.cfg, workspace.Rel(run.Workdir, s.paths.root))
		switch {
		case after.err != nil:
			v.notes = append(v.notes, after.cmdline+" "+after.err.Error())
		case after.stopped:
			v.notes = append(v.notes, fmt.Sprintf("%s was stopped after %s (lsp.checker_timeout)", after.cmdline, p.conf.CheckerTimeout))
		case after.failed():
			v.notes = append(v.notes, fmt.Sprintf("%s failed (exit %d) without naming a problem; its output ends: %s", after.cmdline, after.code, lastLine(after.output)))
		default:
			v.checker = after.cmdline
			var sure bool
			v.problems, sure = newProblems(*baseline, after)
			if !sure {
				v.notes = append(v.notes, fmt.Sprintf("%s could not run before the rename, so some of its %d problem(s) may be older", after.cmdline, len(v.problems)))
			}
		}
	}
	if old == "" {
		v.notes = append(v.notes, "the old name could not be read at the cursor, so its leftovers were not searched for")
	} else if cut := p.leftovers(run, s, &v); cut != "" {
		v.notes = append(v.notes, cut)
	}
	return v
}

// newProblems returns the problems of after beyond those of before, by
// path and message (a rename moves no line, but a message may name a
// column); sure is false when before did not run to its end, and then
// every problem of after is returned.
func newProblems(before, after checkRun) (fresh []checkProblem, sure bool) {
	if before.err != nil || before.stopped || before.failed() {
		return after.problems, false
	}
	type key struct{ path, msg string }
	known := map[key]int{}
	for _, pr := range before.problems {
		known[key{pr.path, pr.msg}]++
	}
	for _, pr := range after.problems {
		k := key{pr.path, pr.msg}
		if known[k] > 0 {
			known[k]--
			continue
		}
		fresh = append(fresh, pr)
	}
	return fresh, true
}

// maxLeftoverFiles bounds the files searched for the old name.
const maxLeftoverFiles = 10000

// maxLeftovers bounds the leftovers listed.
const maxLeftovers = 20

// leftovers searches the files of s's languages under the workdir
// (skipping what workspace.SkipDir names, and links) for v.name as a whole
// identifier, as a user's search for the old name would, and records
// what it finds in v. It returns why the search stopped early, or "".
func (p *Provider) leftovers(run *orchestrator.Run, s *server, v *verification) (cut string) {
	stopped, _ := s.paths.eachSourceFile(run.Workdir, s.cfg.Extensions, false, func(path string, b []byte) {
		rel := workspace.Rel(run.Workdir, path)
		for i, line := range strings.Split(string(b), "\n") {
			for _, at := range identifierAt(line, v.name) {
				v.leftN++
				if len(v.left) < maxLeftovers {
					l := location{path: rel, line: i + 1, col: utf8.RuneCountInString(line[:at]) + 1, text: strings.TrimSuffix(line, "\r")}
					v.left = append(v.left, l.String())
				}
			}
		}
	})
	if stopped {
		cut = fmt.Sprintf("the search for %q stopped after %d files", v.name, maxLeftoverFiles)
	}
	return cut
}

// identifierAt returns the byte offsets in line where name occurs as a
// whole identifier.
func identifierAt(line, name string) []int {
	var out []int
	for i := 0; ; {
		j := strings.Index(line[i:], name)
		if j < 0 {
			return out
		}
		at, end := i+j, i+j+len(name)
		before, _ := utf8.DecodeLastRuneInString(line[:at])
		after, _ := utf8.DecodeRuneInString(line[end:])
		if (at == 0 || !isIdent(before)) && (end == len(line) || !isIdent(after)) {
			out = append(out, at)
		}
		i = at + 1
	}
}

// verdict is the first line's account of the checks: "No new problems"
// only when the checker ran clean, the server found nothing new and the
// old name is gone; otherwise what was found and what was not checked.
func (v verification) verdict() string {
	var found []string
	if n := len(v.problems) + len(v.fresh); n > 0 {
		found = append(found, fmt.Sprintf("%d new problem(s)", n))
	}
	if v.leftN > 0 {
		found = append(found, fmt.Sprintf("%q still occurs %d time(s) in %s files (a use the server missed, or a comment, a string or another symbol of that name)", v.name, v.leftN, v.langs))
	}
	if len(found) == 0 && len(v.notes) == 0 {
		return fmt.Sprintf("No new problems: %s found none, and %q occurs nowhere else in %s files under the workdir.", v.checker, v.name, v.langs)
	}
	var out []string
	if len(found) > 0 {
		out = append(out, "Check it: "+strings.Join(found, "; ")+".")
	}
	// Whether the checker ran is said whatever else was found; when it
	// did not, the notes say why.
	switch {
	case v.checker == "":
	case len(v.problems) == 0:
		out = append(out, fmt.Sprintf("%s found no new problems.", v.checker))
	default:
		out = append(out, fmt.Sprintf("%s found %d new problem(s).", v.checker, len(v.problems)))
	}
	if len(v.notes) > 0 {
		note := "Not fully checked: " + v.notes[0]
		if len(v.notes) > 1 {
			note += fmt.Sprintf(" (and %d more below)", len(v.notes)-1)
		}
		out = append(out, note+".")
	}
	return strings.Join(out, " ")
}

// details lists what the verdict counts, at most max problems.
func (v verification) details(max int) string {
	var b strings.Builder
	if len(v.problems) > 0 {
		fmt.Fprintf(&b, "New problems from %s:\n", v.checker)
		for i, pr := range v.problems {
			if i == max {
				fmt.Fprintf(&b, "  … and %d more\n", len(v.problems)-i)
				break
			}
			b.WriteString("  " + pr.String() + "\n")
		}
	}
	if len(v.fresh) > 0 {
		_, text := capped(v.fresh, max, max)
		b.WriteString("New problems from the language server:\n  " + strings.ReplaceAll(text, "\n", "\n  ") + "\n")
	}
	if v.leftN > 0 {
		fmt.Fprintf(&b, "%q still occurs at:\n  %s\n", v.name, strings.Join(v.left, "\n  "))
		if n := v.leftN - len(v.left); n > 0 {
			fmt.Fprintf(&b, "  … and %d more\n", n)
		}
	}
	if len(v.notes) > 1 {
		b.WriteString("Not checked:\n  " + strings.Join(v.notes, "\n  ") + "\n")
	}
	return b.String()
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
