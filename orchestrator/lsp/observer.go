package lsp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"go.lsp.dev/protocol"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// WillWrite records the current diagnostics of the files about to be
// written as already known, so problems they had before the write are not
// reported as new. It is best effort within WillWriteTimeout and never
// fails because of a server.
func (p *Provider) WillWrite(ctx context.Context, run *orchestrator.Run, paths []string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			slog.Error("lsp: files/willWrite panicked", "run", run.ID, "panic", r, "stack", string(debug.Stack()))
			err = nil // the baseline is best effort; the write goes on
		}
	}()
	if !run.Feature(orchestrator.FeatureLSP) {
		return nil
	}
	files, err := resolvePaths(run, paths)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, p.conf.WillWriteTimeout)
	defer cancel()
	reg := p.state(run).reg
	for _, g := range p.byServer(ctx, run, files, nil) {
		for abs, items := range g.s.baselines(ctx, g.files) {
			reg.record(workspace.Rel(run.Workdir, abs), items)
		}
	}
	return nil
}

// serverFiles is the files of a write that one server serves.
type serverFiles struct {
	s     *server
	files []string
}

// byServer groups files by the server that serves each, in the order
// their servers first come, starting those not started yet. A file no
// server is meant for (bad nil), or none can serve here, goes to skip
// instead, when skip is set.
func (p *Provider) byServer(ctx context.Context, run *orchestrator.Run, files []string, skip func(abs string, bad *orchestrator.Result)) []serverFiles {
	var groups []serverFiles
	at := map[*server]int{}
	for _, abs := range files {
		var s *server
		var bad *orchestrator.Result
		if p.meantFor(abs) {
			s, bad = p.serverFor(ctx, run, abs)
		}
		if s == nil || bad != nil {
			if skip != nil {
				skip(abs, bad)
			}
			continue
		}
		i, ok := at[s]
		if !ok {
			i = len(groups)
			at[s] = i
			groups = append(groups, serverFiles{s: s})
		}
		groups[i].files = append(groups[i].files, abs)
	}
	return groups
}

// baselines syncs files on s and returns the diagnostics of each it
// could learn, converted. A server that can diagnose everything at once
// (gopls) is asked once for all of them, not once per file.
func (s *server) baselines(ctx context.Context, files []string) map[string][]diag {
	docs := map[string]document{}
	for _, abs := range files {
		doc, err := s.sync(ctx, abs, false)
		if err != nil {
			continue
		}
		s.docs.touch(abs)
		docs[abs] = doc
	}
	got, _, _ := s.diagnoseDocs(ctx, docs, nil)
	out := map[string][]diag{}
	for abs, items := range got {
		out[abs] = s.convert(abs, items, docs[abs].text)
	}
	return out
}

// DidWrite syncs the written files with their servers and reports only
// the diagnostics the write introduced, in them and in other files. A
// server that is missing, cold, crashed or slow makes the state "unknown";
// it never makes the call fail.
func (p *Provider) DidWrite(ctx context.Context, run *orchestrator.Run, paths []string) (rep *orchestrator.WriteReport, err error) {
	defer func() {
		if r := recover(); r != nil {
			slog.Error("lsp: files/didWrite panicked", "run", run.ID, "panic", r, "stack", string(debug.Stack()))
			rep, err = &orchestrator.WriteReport{State: orchestrator.WriteUnknown, Diagnostics: []orchestrator.Diagnostic{},
				Text: fmt.Sprintf("the write was not checked: the language-server check failed with an internal error (%v)", r)}, nil
		}
	}()
	if !run.Feature(orchestrator.FeatureLSP) {
		return &orchestrator.WriteReport{State: orchestrator.WriteUnknown, Diagnostics: []orchestrator.Diagnostic{},
			Text: "language servers are off for this run, so the write was not checked"}, nil
	}
	files, err := resolvePaths(run, paths)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return &orchestrator.WriteReport{State: orchestrator.WriteUnknown, Diagnostics: []orchestrator.Diagnostic{},
			Text: "no paths were given, so nothing was checked: list the files the write changed"}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.conf.DiagnosticsTimeout)
	defer cancel()
	var unknown, unmeant []string
	groups := p.byServer(ctx, run, files, func(abs string, bad *orchestrator.Result) {
		rel := workspace.Rel(run.Workdir, abs)
		if bad == nil {
			unmeant = append(unmeant, rel)
		} else {
			unknown = append(unknown, whyNot(rel, bad.FirstText()))
		}
	})
	var mu sync.Mutex
	var fresh []diag
	var wg sync.WaitGroup
	servers := make([]*server, 0, len(groups))
	for _, g := range groups {
		s := g.s
		servers = append(servers, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					slog.Error("lsp: checking a write panicked", "run", run.ID, "server", s.cfg.Name, "panic", r, "stack", string(debug.Stack()))
					mu.Lock()
					unknown = append(unknown, fmt.Sprintf("%s: internal error (%v)", s.cfg.Name, r))
					mu.Unlock()
				}
			}()
			f, miss := p.check(ctx, run, s, g.files)
			mu.Lock()
			fresh = append(fresh, f...)
			unknown = append(unknown, miss...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	rep = p.report(fresh, unknown, unmeant, servers)
	if run.Resumed && p.state(run).restartNoted.CompareAndSwap(false, true) {
		rep.Text = strings.TrimPrefix(rep.Text+"\n"+restartedReport, "\n")
	}
	return rep, nil
}

// restartedReport ends the first write report of a run resumed after
// Berth restarted (issue 29 item 3): the registry of the diagnostics
// already reported is held in memory alone, and was lost.
const restartedReport = "(Berth restarted since this run's earlier reports, and its record of the problems already reported was lost with it: a problem reported before the restart may be reported here again as new. From this report on, only new ones are.)"

// meantFor says whether a server of the catalog is meant for the file's
// extension, whether or not one can serve it here.
func (p *Provider) meantFor(abs string) bool {
	ext := strings.ToLower(filepath.Ext(abs))
	for _, sc := range p.conf.Servers {
		if _, ok := sc.Extensions[ext]; ok {
			return true
		}
	}
	return false
}

// maxWhyNot bounds the reason a file was not checked: a server's start
// failure may carry its stderr, which lsp status shows whole.
const maxWhyNot = 600

// whyNot is the one line of a write report that says why a file was not
// checked, led by its path: the whole reason, whose indented lines (a
// list, one per server) are joined with "; ".
func whyNot(rel, reason string) string {
	var b strings.Builder
	inList := false
	for i, l := range strings.Split(reason, "\n") {
		item := strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t")
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		switch {
		case i == 0:
		case item && inList:
			b.WriteString("; ")
		case strings.HasSuffix(b.String(), ":"):
			b.WriteString(" ")
		case strings.HasSuffix(b.String(), "."):
			b.WriteString(" ")
		default:
			b.WriteString(". ")
		}
		inList = item
		b.WriteString(l)
	}
	line := b.String()
	if len(line) > maxWhyNot {
		cut := maxWhyNot
		for !utf8.RuneStart(line[cut]) {
			cut--
		}
		line = line[:cut] + "… (lsp status with this file says the rest)"
	}
	if !strings.HasPrefix(line, rel+":") {
		line = rel + ": " + line
	}
	return line
}

// check syncs and saves files on s, waits for their diagnostics and
// returns the new ones (in them and in other files the server reported on
// meanwhile) and the files it could not learn about.
func (p *Provider) check(ctx context.Context, run *orchestrator.Run, s *server, files []string) (fresh []diag, unknown []string) {
	s.writes.mu.Lock()
	defer s.writes.mu.Unlock()
	reg := p.state(run).reg
	before, seq0 := s.diags.snapshot()
	written := map[string]bool{}
	docs := map[string]document{}
	var deleted []string
	for _, abs := range files {
		written[abs] = true
		rel := workspace.Rel(run.Workdir, abs)
		known := s.docs.has(abs) // open since files/willWrite, or a query
		doc, err := s.sync(ctx, abs, true)
		if err == nil {
			s.docs.touch(abs)
		}
		if errors.Is(err, errGone) {
			if !known && !reg.has(rel) {
				// Never seen: a wrong path, or a file deleted before
				// Berth saw it. Nothing says the write left it clean.
				unknown = append(unknown, fmt.Sprintf("%s: the file does not exist (deleted before Berth saw it, or a wrong path), so nothing was checked", rel))
				continue
			}
			reg.forget(rel)
			deleted = append(deleted, abs)
			continue // deleted: nothing of its own to report; its importers may break
		}
		if err != nil {
			unknown = append(unknown, whyNot(rel, fmt.Sprintf("%s: %v", s.cfg.Name, err)))
			continue
		}
		docs[abs] = doc
	}
	got, answered, pullErr := s.diagnoseDocs(ctx, docs, deleted)
	if pullErr != nil {
		unknown = append(unknown, fmt.Sprintf("%s could not diagnose the workspace for this write (%v), so problems it caused in other files may be missing", s.cfg.Name, pullErr))
	}
	for _, abs := range files {
		if _, synced := docs[abs]; !synced {
			continue
		}
		rel := workspace.Rel(run.Workdir, abs)
		items, ok := got[abs]
		if !ok {
			why := "gave no diagnostics for this version in time"
			if !s.proc.alive() {
				why = "exited"
			}
			unknown = append(unknown, fmt.Sprintf("%s: %s %s", rel, s.cfg.Name, why))
			continue
		}
		fresh = append(fresh, p.newOnes(reg, s, abs, items, before)...)
	}
	if (s.pulls() || len(deleted) > 0) && !answered {
		// No publish for a written file stands for the others: listen
		// until the server falls quiet, so a broken importer is heard.
		s.diags.settle(ctx)
	}
	// Other files: those published since the previous check ended, so a
	// report that came after that check's debounce is not lost.
	since, seq := s.diags.since(min(s.writes.checked, seq0))
	s.writes.checked = seq
	outside, outsideFiles := 0, 0
	for abs, pub := range since {
		if written[abs] {
			continue
		}
		if pub.outside {
			// Never shown, nor read; but a write that broke it is not clean.
			if n := newOutside(pub.items, before[abs]); n > 0 && pub.seq > seq0 {
				outside += n
				outsideFiles++
			}
			continue
		}
		if rel := workspace.Rel(run.Workdir, abs); pub.seq <= seq0 && !reg.has(rel) {
			// First seen between checks: what it has is its baseline.
			reg.record(rel, problems(s.convert(abs, pub.items, s.linesOf(abs))))
			continue
		}
		fresh = append(fresh, p.newOnes(reg, s, abs, pub.items, before)...)
	}
	if outside > 0 {
		unknown = append(unknown, fmt.Sprintf("%s reported %d new problem(s) in %d file(s) that resolve outside the working directory (through a symlink), not shown", s.cfg.Name, outside, outsideFiles))
	}
	return fresh, unknown
}

// writeCheck keeps one diagnostics-on-write exchange (check) at a time
// on a server, and where the last one ended.
type writeCheck struct {
	mu      sync.Mutex
	checked uint64 // the publish counter when the last exchange ended
}

// newOutside counts the errors and warnings of items beyond those of
// before, by severity, code and message: a file outside the workdir is
// not read to place them.
func newOutside(items, before []protocol.Diagnostic) int {
	key := func(d protocol.Diagnostic) diagKey {
		k := diagKey{severity: severityName(d.Severity), message: messageText(d.Message)}
		if d.Code != nil {
			k.code = fmt.Sprint(d.Code)
		}
		return k
	}
	known := map[diagKey]int{}
	for _, d := range before {
		known[key(d)]++
	}
	n := 0
	for _, d := range items {
		if d.Severity > protocol.DiagnosticSeverityWarning {
			continue
		}
		if k := key(d); known[k] > 0 {
			known[k]--
		} else {
			n++
		}
	}
	return n
}

// newOnes keeps a file's errors and warnings, and returns those new for
// the run's registry (the pre-write diagnostics stand in for a file the
// registry has no record of).
func (p *Provider) newOnes(reg *registry, s *server, abs string, items []protocol.Diagnostic, before map[string][]protocol.Diagnostic) []diag {
	text := s.linesOf(abs)
	cur := problems(s.convert(abs, items, text))
	base := problems(s.convert(abs, before[abs], text))
	rel := workspace.Rel(s.paths.workdir, abs)
	f := reg.update(rel, cur, base)
	p.metrics.Diagnostics.WithLabelValues("new").Add(float64(len(f)))
	p.metrics.Diagnostics.WithLabelValues("suppressed").Add(float64(len(cur) - len(f)))
	return f
}

// problems keeps errors and warnings: hints and information are advice,
// not breakage.
func problems(ds []diag) []diag {
	var out []diag
	for _, d := range ds {
		if d.severity <= 2 {
			out = append(out, d)
		}
	}
	return out
}

// report builds the answer to files/didWrite from what checking on
// servers found. Files no server is meant for (unmeant: data, docs) get
// one line, and leave the state to the files that were checked: unknown
// when there were none.
func (p *Provider) report(fresh []diag, unknown, unmeant []string, servers []*server) *orchestrator.WriteReport {
	shown, text := capped(fresh, p.conf.MaxPerFile, p.conf.MaxTotal)
	rep := &orchestrator.WriteReport{Diagnostics: []orchestrator.Diagnostic{}}
	for _, d := range shown {
		rep.Diagnostics = append(rep.Diagnostics, orchestrator.Diagnostic{Path: d.rel, Line: d.line, Col: d.col,
			Severity: severityName(d.severity), Code: d.code, Source: d.source, Message: d.message})
	}
	sort.Strings(unknown)
	var parts []string
	switch {
	case len(fresh) > 0:
		rep.State = orchestrator.WriteIssues
		parts = append(parts, fmt.Sprintf("This write introduced %d new problem(s):\n%s", len(fresh), text))
	case len(unknown) > 0 || len(servers) == 0:
		rep.State = orchestrator.WriteUnknown
	default:
		rep.State = orchestrator.WriteClean
		parts = append(parts, "No new problems: the language server checked the written version.")
	}
	if len(unknown) > 0 {
		parts = append(parts, "Not checked (state unknown, not clean):\n  "+strings.Join(unknown, "\n  "))
	}
	for _, s := range servers {
		if openFilesOnly[filepath.Base(s.cfg.Command[0])] {
			parts = append(parts, fmt.Sprintf("(%s reports only on files it has open: other files that use what changed were not checked; lsp diagnostics \"*\" checks the whole project.)", s.cfg.Name))
		}
	}
	if len(unmeant) > 0 {
		parts = append(parts, unmeantLine(unmeant))
	}
	rep.Text = strings.Join(parts, "\n")
	return rep
}

// unmeantLine says in one line which written files no language server
// checks, by extension.
func unmeantLine(rels []string) string {
	sort.Strings(rels)
	var exts []string
	for _, r := range rels {
		e := strings.ToLower(filepath.Ext(r))
		if e == "" {
			e = "extensionless"
		}
		if !slices.Contains(exts, e) {
			exts = append(exts, e)
		}
	}
	sort.Strings(exts)
	verb := "was"
	if len(rels) > 1 {
		verb = "were"
	}
	return fmt.Sprintf("%s %s not checked: no language server is meant for %s files.", strings.Join(rels, ", "), verb, strings.Join(exts, " or "))
}

// openFilesOnly names, by executable, the servers that diagnose only the
// files they have open, so a write's report cannot cover the files that
// use what it changed: it says so rather than let "clean" promise it.
// (pyright would be one, but its catalog entry asks for the workspace.)
var openFilesOnly = map[string]bool{"typescript-language-server": true, "clangd": true, "pylsp": true}

// resolvePaths resolves the harness's paths inside the workdir.
func resolvePaths(run *orchestrator.Run, paths []string) ([]string, error) {
	root, err := run.Root()
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, p := range paths {
		abs, err := root.Resolve(p)
		if err != nil {
			return nil, fmt.Errorf("%v: %w", err, orchestrator.ErrInvalid)
		}
		if !seen[abs] {
			seen[abs] = true
			out = append(out, abs)
		}
	}
	return out, nil
}
