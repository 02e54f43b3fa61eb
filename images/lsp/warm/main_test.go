package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// What warm fills for the standard library is what a gopls driven as
// Berth drives it looks up for a project of its own: on a cache warm
// filled, a module that imports net/http adds a small part of what it
// adds to an empty cache, where gopls loads the standard library
// packages it imports too.
//
// Issue 28 item 3.
func TestAModuleFindsTheStandardLibraryInTheCacheWarmFilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	mod := t.TempDir()
	files := map[string]string{
		"go.mod":  "module example.com/hello\n\ngo 1.22\n",
		"main.go": "package main\n\nimport (\n\t\"fmt\"\n\t\"net/http\"\n)\n\nfunc main() {\n\tfmt.Println(\"hello\", http.StatusOK)\n}\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(mod, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	count := func() int {
		dir, err := cacheDir()
		if err != nil {
			t.Fatal(err)
		}
		n, _ := usage(dir)
		return n
	}

	t.Setenv("GOPLSCACHE", t.TempDir())
	what, err := warm(ctx, "gopls", "")
	if err != nil {
		t.Fatal(err)
	}
	std := count()
	if _, err := warm(ctx, "gopls", mod); err != nil {
		t.Fatal(err)
	}
	added := count() - std
	t.Logf("%s: %d files; the module then added %d", what, std, added)

	t.Setenv("GOPLSCACHE", t.TempDir())
	if _, err := warm(ctx, "gopls", mod); err != nil {
		t.Fatal(err)
	}
	alone := count()
	t.Logf("the module alone, on an empty cache: %d files", alone)
	if added*5 > alone {
		t.Errorf("on the cache warm filled the module added %d files, on an empty one %d: gopls did not find the standard library's entries (were they filled with other capabilities or options than Berth's?)", added, alone)
	}
}
