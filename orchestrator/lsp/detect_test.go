package lsp

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestAServersFirstFileIsOfItsFirstLanguage: the file a load probe
// opens and a cold warm-up asks about is of the server's first language
// when the root has one, so that a TypeScript project's config script at
// its root (eslint.config.mjs, outside tsconfig's include) is not the
// file tsserver loads and warms a project for; else it is the first file
// of any of its languages, and so is a file of another language found
// more than maxPreferDirs directories before one of the first;
// directories that are skipped stay skipped. hasFile, which asks only
// whether there is one, agrees.
func TestAServersFirstFileIsOfItsFirstLanguage(t *testing.T) {
	var ts ServerConfig
	for _, sc := range DefaultServers() {
		if sc.Name == "typescript-language-server" {
			ts = sc
		}
	}
	write := func(dir string, files ...string) {
		for _, f := range files {
			p := filepath.Join(dir, filepath.FromSlash(f))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("export const x = 1\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	deep := []string{"a.js"} // then more directories than firstFile looks through for a .ts
	for i := range maxPreferDirs + 2 {
		deep = append(deep, fmt.Sprintf("d%03d/README.md", i))
	}
	deep = append(deep, "zz/b.ts")
	for _, tc := range []struct {
		name  string
		files []string
		want  string
	}{
		{"a .ts file after a config script", []string{"eslint.config.mjs", "jest.config.cjs", "README.md", "src/client/index.ts", "src/z.ts"}, "src/client/index.ts"},
		{"a .tsx file counts as TypeScript", []string{"a.js", "b/view.tsx"}, "b/view.tsx"},
		{"JavaScript alone", []string{"README.md", "lib/b.js", "lib/c.mjs"}, "lib/b.js"},
		{"skipped directories", []string{"node_modules/dep/index.ts", "vite.config.js"}, "vite.config.js"},
		{"none", []string{"README.md", "go.mod"}, ""},
		{"no .ts within the bound past a .js", deep, "a.js"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(dir, tc.files...)
			got := firstFile(dir, ts)
			if has := hasFile(dir, ts.Extensions); has != (tc.want != "") {
				t.Errorf("hasFile = %v, want %v", has, tc.want != "")
			}
			if tc.want == "" {
				if got != "" {
					t.Fatalf("firstFile = %q, want none", got)
				}
				return
			}
			if want := filepath.Join(dir, filepath.FromSlash(tc.want)); got != want {
				t.Fatalf("firstFile = %q, want %q", got, want)
			}
		})
	}
}
