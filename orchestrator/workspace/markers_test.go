package workspace

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestMarkerDirsFindsEachMarkersDirectoriesAndSkipsDependencies(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{
		"go.mod",
		"svc/go.mod",
		"web/package.json",
		"web/node_modules/left-pad/package.json", // a dependency's
		".hidden/go.mod",
		"vendor/x/go.mod",
		"deep/a/b/go.mod",
	} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := MarkerDirs(dir, []string{"go.mod", "package.json"}, 100)
	want := map[string][]string{
		"go.mod":       {".", "deep/a/b", "svc"},
		"package.json": {"web"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("MarkerDirs = %v, want %v", got, want)
	}
	// The walk stops after maxDirs directories: the top only.
	if got := MarkerDirs(dir, []string{"go.mod"}, 1); !reflect.DeepEqual(got, map[string][]string{"go.mod": {"."}}) {
		t.Errorf("MarkerDirs with maxDirs 1 = %v, want the top's marker only", got)
	}
}

func TestRootsListsEachDirectoryOnceTheShallowestFirst(t *testing.T) {
	got := Roots(map[string][]string{"go.mod": {".", "b/c", "z"}, "package.json": {"a/b/c", "a", "z"}})
	if want := []string{".", "a", "z", "b/c", "a/b/c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Roots = %v, want %v", got, want)
	}
}
