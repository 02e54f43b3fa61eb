package structural

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// maxIgnoreBytes caps a .gitignore file read; a larger one is not read.
const maxIgnoreBytes = 1 << 20

// walker sends every file of a language under a folder to out, honouring
// the .gitignore files from the workspace root down, and skipping hidden
// files and folders (as ripgrep and ast-grep do), symlinks (which may
// lead outside the workspace) and anything not a regular file (a FIFO, a
// socket). Every folder and .gitignore is read through the workspace
// root, so a folder swapped for a symlink while it is walked is refused,
// not followed. A folder it cannot read is passed to skipped, not a
// reason to fail the search.
type walker struct {
	root    *workspace.Root
	l       *language
	out     chan<- string
	skipped func(dir string, err error)
	// own counts the files of the language found; others the other
	// regular files by extension, to say what a folder holds when it has
	// none of the language.
	own    int
	others map[string]int
}

// walk walks dir, a folder inside the root.
func (w *walker) walk(ctx context.Context, dir string) error {
	w.others = map[string]int{}
	rootDir := w.root.Dir()
	ig := (&ignorer{}).with(w.ignoreRules(rootDir, filepath.Join(rootDir, ".git", "info", "exclude")))
	// The rules of every folder from the root down to dir apply.
	rel, err := filepath.Rel(rootDir, dir)
	if err != nil {
		return err
	}
	cur := rootDir
	ig = ig.with(w.ignoreFile(cur))
	if rel != "." {
		for _, part := range strings.Split(rel, string(filepath.Separator)) {
			cur = filepath.Join(cur, part)
			ig = ig.with(w.ignoreFile(cur))
		}
	}
	return w.dir(ctx, dir, ig)
}

func (w *walker) dir(ctx context.Context, dir string, ig *ignorer) error {
	entries, err := w.root.ReadDir(dir)
	if err != nil {
		w.skipped(dir, err)
		return nil
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !e.Type().IsRegular() && !e.IsDir() {
			continue // hidden, a symlink, a FIFO, a socket, a device
		}
		p := filepath.Join(dir, name)
		if e.IsDir() {
			if ig.ignored(p, true) {
				continue
			}
			if err := w.dir(ctx, p, ig.with(w.ignoreFile(p))); err != nil {
				return err
			}
			continue
		}
		if ig.ignored(p, false) {
			continue
		}
		if !w.l.owns(name) {
			w.others[strings.ToLower(filepath.Ext(name))]++
			continue
		}
		w.own++
		select {
		case w.out <- p:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// ignoreFile returns the rules of dir's .gitignore (none if it has none).
func (w *walker) ignoreFile(dir string) []ignoreRule {
	return w.ignoreRules(dir, filepath.Join(dir, ".gitignore"))
}

// ignoreRules reads the rules in file, which apply from dir down; a file
// that is missing, too large or not a regular file has none.
func (w *walker) ignoreRules(dir, file string) []ignoreRule {
	b, _, err := w.root.ReadRegular(file, maxIgnoreBytes)
	if err != nil {
		return nil
	}
	return parseIgnore(dir, b)
}

// found says what the walk saw besides the language's files, for "no
// files of language X": most files first, the languages the tools know
// before other extensions.
func (w *walker) found(langs *languages) string {
	counts := map[string]int{}
	known := map[string]bool{} // languages the tools could search instead
	for ext, n := range w.others {
		switch l := langs.byExt[ext]; {
		case l != nil:
			counts[l.name+" ("+ext+")"] += n
			known[l.name+" ("+ext+")"] = true
		case ext == "":
			counts["no extension"] += n
		default:
			counts[ext] += n
		}
	}
	if len(counts) == 0 {
		return "no files"
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if counts[a] != counts[b] {
			return counts[a] > counts[b]
		}
		if known[a] != known[b] {
			return known[a]
		}
		return a < b
	})
	var parts []string
	for i, k := range keys {
		if i == 8 {
			parts = append(parts, fmt.Sprintf("… %d more kinds", len(keys)-8))
			break
		}
		parts = append(parts, fmt.Sprintf("%s: %s", k, text.Count(counts[k], "file")))
	}
	return strings.Join(parts, ", ")
}
