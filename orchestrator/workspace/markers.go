package workspace

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// MaxMarkerDirs is the bound the tools walk a workdir with to find its
// roots (MarkerDirs): past it, a huge tree's deeper roots go unseen
// rather than the walk taking seconds.
const MaxMarkerDirs = 5000

// MarkerDirs walks the workdir once, at most maxDirs directories and
// skipping what SkipDir names, and returns for each marker the
// directories (relative to the workdir, "." for its top) that hold it, in
// the walk's order: a project's roots, for the tools that start a server
// or a build per root.
func MarkerDirs(workdir string, markers []string, maxDirs int) map[string][]string {
	found := map[string][]string{}
	seen := 0
	_ = filepath.WalkDir(workdir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if p != workdir && SkipDir(d.Name()) {
			return filepath.SkipDir
		}
		if seen++; seen > maxDirs {
			return filepath.SkipAll
		}
		for _, mk := range markers {
			if _, err := os.Stat(filepath.Join(p, mk)); err == nil {
				found[mk] = append(found[mk], Rel(workdir, p))
			}
		}
		return nil
	})
	return found
}

// SkipDir says whether a walk for a project's files passes over a
// directory of this name: dependencies, build output, version control,
// virtual environments and hidden directories.
func SkipDir(name string) bool {
	switch name {
	case "node_modules", ".git", ".hg", ".svn", "vendor", "target", "build", "dist", "__pycache__", ".venv", "venv":
		return true
	}
	return strings.HasPrefix(name, ".")
}

// Roots lists the directories MarkerDirs found, each once, the
// shallowest first and by name within a depth: the order in which a
// project's roots are served.
func Roots(dirs map[string][]string) []string {
	seen := map[string]bool{}
	var rels []string
	for _, ds := range dirs {
		for _, d := range ds {
			if !seen[d] {
				seen[d] = true
				rels = append(rels, d)
			}
		}
	}
	depth := func(rel string) int {
		if rel == "." {
			return 0
		}
		return strings.Count(rel, "/") + 1
	}
	slices.SortFunc(rels, func(x, y string) int {
		if dx, dy := depth(x), depth(y); dx != dy {
			return dx - dy
		}
		return strings.Compare(x, y)
	})
	return rels
}
