package structural

import (
	"context"
	"os"
	"path/filepath"
	"strings"
)

// walk sends every file of language l under dir to out, honouring the
// .gitignore files from the workspace root down, and skipping hidden
// files and folders (as ripgrep and ast-grep do) and symlinks (which may
// lead outside the workspace). rootDir is the workspace root. A folder
// it cannot read is passed to skipped, not a reason to fail the search.
func walk(ctx context.Context, rootDir, dir string, l *language, out chan<- string, skipped func(dir string, err error)) error {
	ig := &ignorer{}
	if b, err := os.ReadFile(filepath.Join(rootDir, ".git", "info", "exclude")); err == nil {
		ig = ig.with(parseIgnore(rootDir, b))
	}
	// The rules of every folder from the root down to dir apply.
	rel, err := filepath.Rel(rootDir, dir)
	if err != nil {
		return err
	}
	cur := rootDir
	ig = ig.with(readIgnoreFile(cur))
	if rel != "." {
		for _, part := range strings.Split(rel, string(filepath.Separator)) {
			cur = filepath.Join(cur, part)
			ig = ig.with(readIgnoreFile(cur))
		}
	}
	return walkDir(ctx, dir, ig, l, out, skipped)
}

func walkDir(ctx context.Context, dir string, ig *ignorer, l *language, out chan<- string, skipped func(string, error)) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		skipped(dir, err)
		return nil
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || e.Type()&os.ModeSymlink != 0 {
			continue
		}
		p := filepath.Join(dir, name)
		if e.IsDir() {
			if ig.ignored(p, true) {
				continue
			}
			if err := walkDir(ctx, p, ig.with(readIgnoreFile(p)), l, out, skipped); err != nil {
				return err
			}
			continue
		}
		if !e.Type().IsRegular() || !l.owns(name) || ig.ignored(p, false) {
			continue
		}
		select {
		case out <- p:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
