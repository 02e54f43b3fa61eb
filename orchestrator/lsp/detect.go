package lsp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/internal/errclass"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// match is what detection found for one catalog entry and one file.
type match struct {
	cfg     ServerConfig
	root    string // absolute; "" when no marker was found
	exe     string // resolved executable; "" when missing
	exeErr  error
	missing string // why it cannot serve, "" when it can
}

// detect finds the server for a file (absolute, inside the workdir). It
// returns the first entry that can serve it, or an error result that names
// the missing half of every entry that could have. running (may be nil)
// says a server already runs for a root: its executable evidently
// resolved, so it is not searched for again (a PATH walk on every query).
func detect(ctx context.Context, run *orchestrator.Run, cfg Config, abs string, running func(root, name string) bool) (match, *orchestrator.Result) {
	ext := strings.ToLower(filepath.Ext(abs))
	var tried []match
	for _, s := range cfg.Servers {
		if _, ok := s.Extensions[ext]; !ok {
			continue
		}
		m := probe(ctx, run, s, filepath.Dir(abs), running)
		if m.missing == "" {
			return m, nil
		}
		tried = append(tried, m)
	}
	rel := workspace.Rel(run.Workdir, abs)
	for _, m := range tried {
		if enclosure.Down(m.exeErr) {
			return match{}, orchestrator.Errorf("no language server can serve %s: %s", rel, enclosure.Say(m.exeErr))
		}
	}
	if len(tried) == 0 {
		return match{}, orchestrator.Errorf("no language server is configured for %q files (%s); configured extensions: %s. Use ast_grep or read the file instead.",
			ext, rel, strings.Join(knownExtensions(cfg), " "))
	}
	var why []string
	for _, m := range tried {
		why = append(why, fmt.Sprintf("%s: %s", m.cfg.Name, m.missing))
	}
	return match{}, orchestrator.Errorf("no language server can serve %s:\n  %s\nA server starts only when a root marker exists at or above the file inside the workdir and its executable is installed in the run's enclosure.",
		rel, strings.Join(why, "\n  ")).Classed(errclass.ErrNotFound)
}

// probe checks one entry for a directory: root marker at or above dir
// (inside the workdir) and executable.
func probe(ctx context.Context, run *orchestrator.Run, s ServerConfig, dir string, running func(root, name string) bool) match {
	m := match{cfg: s, root: findRoot(run.Workdir, dir, s.RootMarkers)}
	if m.root != "" && running != nil && running(m.root, s.Name) {
		return m // its slot starts it again, if need be, with the match it began with
	}
	m.exe, m.exeErr = run.Enclosure.LookPath(ctx, s.Command[0])
	var missing []string
	if m.root == "" {
		missing = append(missing, fmt.Sprintf("no root marker (%s) at or above %s inside the workdir",
			strings.Join(s.RootMarkers, ", "), workspace.Rel(run.Workdir, dir)+"/"))
	}
	if m.exeErr != nil {
		m.exe = ""
		if enclosure.Down(m.exeErr) {
			// The container, not the server: a stopped, removed or
			// paused container, or an engine that does not answer, says
			// so and what to do (issue 24 item 11).
			m.missing = enclosure.Say(m.exeErr)
			return m
		}
		missing = append(missing, fmt.Sprintf("executable %q not found in the %s enclosure", s.Command[0], run.Enclosure.Driver()))
	}
	m.missing = strings.Join(missing, "; and ")
	return m
}

// findRoot returns the nearest directory at or above dir, not above
// workdir, that holds one of the markers, or "".
func findRoot(workdir, dir string, markers []string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if d != workdir && !strings.HasPrefix(d, workdir+string(filepath.Separator)) {
			return ""
		}
		for _, mk := range markers {
			if _, err := os.Stat(filepath.Join(d, mk)); err == nil {
				return d
			}
		}
		if d == workdir {
			return ""
		}
	}
}

// firstFile returns a file under root that sc serves, or "" (findFile).
// A file of sc's first language usually comes before one of its others:
// a project's config scripts, which its build leaves out, are often of
// another (codemirror-promql's eslint.config.mjs, at its root, before
// src/), and a server asked about a file outside the project loads and
// warms nothing the run's calls use. Once it has found a file of
// another language, it looks for one of the first through at most
// maxPreferDirs more directories (a JavaScript project's tree is not
// walked to its end for a .ts file, nor a tree of an entry whose
// Languages, which name them for status, are not language ids).
func firstFile(root string, sc ServerConfig) string {
	lang := "" // any file, for an entry that names no languages
	if len(sc.Languages) > 0 {
		lang = sc.Languages[0]
	}
	other, past := "", 0 // the first file of another language; directories entered since
	found := findFile(root, sc.Extensions, func(p, id string) bool {
		if strings.HasPrefix(id, lang) {
			return true
		}
		if other == "" {
			other = p
		}
		return false
	}, func() bool {
		if other != "" {
			past++
		}
		return past > maxPreferDirs
	})
	if found == "" {
		return other
	}
	return found
}

// maxPreferDirs bounds the directories firstFile walks for a file of a
// server's first language past the first file of another.
const maxPreferDirs = 64

// hasFile says whether root holds a file with one of exts (findFile).
func hasFile(root string, exts map[string]string) bool {
	return findFile(root, exts, func(string, string) bool { return true }, nil) != ""
}

// findFile returns the first file under root, in lexical order, with one
// of exts (keys with the dot, values language ids) that accept takes,
// skipping what workspace.SkipDir names, or "" when it finds none among
// the first maxMarkerDirs directories, or before stop (if not nil),
// asked at each directory the walk enters, ends it.
func findFile(root string, exts map[string]string, accept func(path, id string) bool, stop func() bool) string {
	found, seen := "", 0
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil
		case d.IsDir():
			if p != root && workspace.SkipDir(d.Name()) {
				return filepath.SkipDir
			}
			if seen++; seen > maxMarkerDirs || (stop != nil && stop()) {
				return filepath.SkipAll
			}
		case d.Type().IsRegular():
			if id, ok := exts[strings.ToLower(filepath.Ext(p))]; ok && accept(p, id) {
				found = p
				return filepath.SkipAll
			}
		}
		return nil
	})
	return found
}

func knownExtensions(cfg Config) []string {
	set := map[string]bool{}
	for _, s := range cfg.Servers {
		for e := range s.Extensions {
			set[e] = true
		}
	}
	var out []string
	for e := range set {
		out = append(out, e)
	}
	sort.Strings(out)
	return out
}
