package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// project is a small real project found on this machine, copied into a
// workdir of its own, with the references query and, where Berth has an
// adapter for the language, a program to debug.
type project struct {
	lang   string // go, python, typescript
	about  string // what it is, for the report
	dir    string // the workdir, once copied
	server string // the catalog's server Berth runs for it (the server alone runs it too)

	// modcache is a Go module cache that holds the project's modules
	// and no others, as a conversation's container has after its
	// project's go mod download ("" for a project without Go modules).
	modcache string

	// The references query: the first line of refsFile holding refsFind,
	// at refsSymbol.
	refsFile, refsFind, refsSymbol string

	// others are two more references queries, each in a file of its
	// own: a run's first query about a file it has not opened yet, the
	// first one in a server's first run and the second in its second,
	// so that the server never had the second open (an adopting run
	// reopens what the run before had open: lsp.reopen_max).
	others [2]query

	// The debug launch, "" where Berth has no adapter: program, stopping
	// at the first line of bpFile holding bpFind.
	program, bpFile, bpFind string
}

// query is a references query: the first line of file holding find, at
// symbol.
type query struct{ file, find, symbol string }

// projects copies the projects of langs into tmp: cobra (Go, from the
// module cache), pyflakes (Python, Debian's python3-pyflakes) and
// codemirror-promql (TypeScript, Prometheus's web UI module, from the
// module cache).
func projects(tmp string, langs []string) ([]*project, error) {
	var out []*project
	for _, lang := range langs {
		var p *project
		var err error
		switch lang {
		case "go":
			p, err = goProject(tmp)
		case "python":
			p, err = pythonProject(tmp)
		case "typescript":
			p, err = typescriptProject(tmp)
		default:
			return nil, fmt.Errorf("-langs: no project for %q; the languages are go, python and typescript", lang)
		}
		if err != nil {
			return nil, fmt.Errorf("%s project: %w", lang, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// goProject: cobra v1.9.1, with a twenty-line program that runs a cobra
// command, to debug, and a module cache of its own modules (projectModules).
func goProject(tmp string) (*project, error) {
	modcache, err := goEnv("GOMODCACHE")
	if err != nil {
		return nil, err
	}
	src := filepath.Join(modcache, "github.com", "spf13", "cobra@v1.9.1")
	dir := filepath.Join(tmp, "go", "cobra")
	if err := copyTree(src, dir, nil); err != nil {
		return nil, fmt.Errorf("%w (fill the module cache: go mod download github.com/spf13/cobra@v1.9.1)", err)
	}
	main := `package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func main() {
	root := &cobra.Command{
		Use: "hello",
		Run: func(cmd *cobra.Command, args []string) {
			name := cmd.Name()
			fmt.Println("hello from", name)
		},
	}
	root.SetArgs(nil)
	_ = root.Execute()
}
`
	if err := os.MkdirAll(filepath.Join(dir, "example"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "example", "main.go"), []byte(main), 0o644); err != nil {
		return nil, err
	}
	mods, err := projectModules(dir, filepath.Join(tmp, "go", "modcache"), modcache)
	if err != nil {
		return nil, err
	}
	return &project{lang: "go", server: "gopls", about: "cobra v1.9.1 (gopls; dlv on a 20-line program that runs a cobra command)", dir: dir, modcache: mods,
		refsFile: "command.go", refsFind: "func (c *Command) Flags() *flag.FlagSet", refsSymbol: "Flags",
		others:  [2]query{{"args.go", "func NoArgs(", "NoArgs"}, {"flag_groups.go", "func (c *Command) MarkFlagsRequiredTogether(", "MarkFlagsRequiredTogether"}},
		program: "example", bpFile: "example/main.go", bpFind: `fmt.Println("hello from", name)`}, nil
}

// projectModules fills a module cache at dst with what the module at dir
// needs to build and test its packages, and only that, from this
// machine's module cache (its download cache as a GOPROXY: no network),
// and returns dst. Its files are writable (-modcacherw), so that the
// run's end can remove them.
func projectModules(dir, dst, modcache string) (string, error) {
	// go list, not go mod download: the packages' modules, and the
	// go.mod files of the module graph, are what a build needs, and
	// what gopls's go list asks for.
	cmd := exec.Command("go", "list", "-deps", "-test", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOMODCACHE="+dst, "GOPROXY=file://"+filepath.Join(modcache, "cache", "download"),
		"GOFLAGS=-mod=mod -modcacherw", "GOSUMDB=off", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go list -deps -test ./... in %s, from this machine's module cache (%s): %w: %s\n"+
			"the download cache lacks a module the project needs: run go mod download in %s where the module proxy is reachable, then run the benchmark again",
			dir, filepath.Join(modcache, "cache", "download"), err, strings.TrimSpace(string(out)), dir)
	}
	return dst, nil
}

// pythonProject: pyflakes, the sources of Debian's python3-pyflakes
// (with its tests), with a pyproject.toml (the root marker) and a script
// that checks a line with it, to debug.
func pythonProject(tmp string) (*project, error) {
	src := "/usr/lib/python3/dist-packages/pyflakes"
	dir := filepath.Join(tmp, "python", "pyflakes")
	if err := copyTree(src, filepath.Join(dir, "pyflakes"), func(name string) bool { return name == "__pycache__" }); err != nil {
		return nil, fmt.Errorf("%w (install python3-pyflakes: scripts/setup does)", err)
	}
	files := map[string]string{
		"pyproject.toml": "[project]\nname = \"pyflakes\"\n",
		"check_example.py": `import io

from pyflakes import api, reporter


def main():
    out = io.StringIO()
    found = api.check("import os\n", "example.py", reporter.Reporter(out, out))
    print(found, out.getvalue())


main()
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return nil, err
		}
	}
	return &project{lang: "python", server: "pyright", about: "pyflakes 2.5 (Debian's python3-pyflakes, with its tests; pyright; debugpy on a script that runs it)", dir: dir,
		refsFile: "pyflakes/checker.py", refsFind: "class Binding:", refsSymbol: "Binding",
		others:  [2]query{{"pyflakes/messages.py", "class Message:", "Message"}, {"pyflakes/api.py", "def check(", "check"}},
		program: "check_example.py", bpFile: "check_example.py", bpFind: "print(found, out.getvalue())"}, nil
}

// typescriptProject: codemirror-promql, Prometheus's PromQL mode for
// CodeMirror (7,900 lines of TypeScript; its node_modules are not
// installed, so its imports of CodeMirror stay unresolved, as in a fresh
// clone).
func typescriptProject(tmp string) (*project, error) {
	modcache, err := goEnv("GOMODCACHE")
	if err != nil {
		return nil, err
	}
	src := filepath.Join(modcache, "github.com", "prometheus", "prometheus@v0.316.0", "web", "ui", "module", "codemirror-promql")
	dir := filepath.Join(tmp, "typescript", "codemirror-promql")
	if err := copyTree(src, dir, nil); err != nil {
		return nil, fmt.Errorf("%w (fill the module cache: go mod download github.com/prometheus/prometheus@v0.316.0)", err)
	}
	return &project{lang: "typescript", server: "typescript-language-server", about: "codemirror-promql from Prometheus v0.316.0 (typescript-language-server; no debug adapter)", dir: dir,
		refsFile: "src/parser/type.ts", refsFind: "export function getType(", refsSymbol: "getType",
		others: [2]query{{"src/parser/path-finder.ts", "export function walkBackward(", "walkBackward"}, {"src/parser/matcher.ts", "export function buildLabelMatchers(", "buildLabelMatchers"}}}, nil
}

// copyTree copies the regular files and directories under src to dst,
// writable (the module cache's are not), skipping the names skip says.
func copyTree(src, dst string, skip func(string) bool) error {
	if _, err := os.Stat(src); err != nil {
		return err
	}
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if skip != nil && skip(d.Name()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type().IsRegular():
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(to, b, 0o644)
		}
		return nil
	})
}

// position finds the first line of file (in dir) holding find: its
// 1-based number.
func position(dir, file, find string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return 0, err
	}
	for i, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, find) {
			return i + 1, nil
		}
	}
	return 0, fmt.Errorf("%s has no line with %q: point the project at a line that is there", file, find)
}

func goEnv(name string) (string, error) {
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}
