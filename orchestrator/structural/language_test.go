package structural

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildLibrary compiles a C file into a shared library with gcc.
func buildLibrary(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	c := filepath.Join(dir, "lib.c")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	so := filepath.Join(dir, "libfake.so")
	if out, err := exec.Command("gcc", "-shared", "-fPIC", "-o", so, c).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return so
}

func TestGrammarLibraries(t *testing.T) {
	// The first field of a TSLanguage is its ABI version.
	wrongABI := buildLibrary(t, "static struct { unsigned abi; } lang = {99};\nconst void *tree_sitter_fake(void) { return &lang; }\n")
	dart := DefaultConfig().Grammars[0]
	dart.Optional = false
	cases := []struct {
		name    string
		grammar GrammarConfig
		err     string // "" when New succeeds
		avail   string // with New succeeding: "" (loaded) or part of why not
	}{
		{"the Dart library scripts/setup builds", dart, "", ""},
		{"a required library that is missing", GrammarConfig{Name: "zig", Library: "/nonexistent/libzig.so", Symbol: "tree_sitter_zig", Extensions: []string{".zig"}},
			`structural.grammars "zig": grammar library /nonexistent/libzig.so: stat /nonexistent/libzig.so: no such file or directory`, ""},
		{"an optional library that is missing", GrammarConfig{Name: "zig", Library: "$HOME/nonexistent/libzig.so", Symbol: "tree_sitter_zig", Extensions: []string{".zig"}, Optional: true},
			"", "language zig is unavailable: grammar library " + os.Getenv("HOME") + "/nonexistent/libzig.so"},
		{"a library with the wrong ABI version", GrammarConfig{Name: "fake", Library: wrongABI, Symbol: "tree_sitter_fake", Extensions: []string{"fake"}},
			"has ABI version 99; this build of tree-sitter reads versions", ""},
		{"a library without the symbol", GrammarConfig{Name: "fake", Library: wrongABI, Symbol: "tree_sitter_other", Extensions: []string{".fake"}},
			"has no symbol tree_sitter_other", ""},
		{"a file that is not a library", GrammarConfig{Name: "fake", Library: "/etc/hostname", Symbol: "tree_sitter_fake", Extensions: []string{".fake"}},
			"cannot be loaded", ""},
		{"an entry without a symbol", GrammarConfig{Name: "fake", Library: wrongABI},
			"an entry needs name, library and symbol", ""},
		{"an entry without extensions", GrammarConfig{Name: "fake", Library: wrongABI, Symbol: "tree_sitter_fake"},
			`structural.grammars "fake": extensions is empty`, ""},
		{"a name that is taken", GrammarConfig{Name: "go", Library: wrongABI, Symbol: "tree_sitter_fake"},
			`"go" is already a language`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Grammars = []GrammarConfig{c.grammar}
			p, err := New(cfg)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("New: %v, want an error containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.langs.pick(c.grammar.Name, "", true)
			switch {
			case c.avail == "" && err != nil:
				t.Errorf("%s is not available: %v", c.grammar.Name, err)
			case c.avail != "" && (err == nil || !strings.Contains(err.Error(), c.avail)):
				t.Errorf("pick: %v, want %q", err, c.avail)
			}
		})
	}
}

// A machine without the Dart library still starts: the built-in entry
// is optional, and Dart is reported unavailable with the reason.
func TestDefaultDartEntryIsOptional(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	p, err := New(DefaultConfig())
	if err != nil {
		t.Fatalf("New with no Dart library: %v", err)
	}
	if why := p.Unavailable()["dart"]; !strings.Contains(why, "libtree-sitter-dart.so") {
		t.Errorf("dart unavailable because %q", why)
	}
	if _, err := p.langs.pick("", "lib/main.dart", false); err == nil || !strings.Contains(err.Error(), "language dart is unavailable") || !strings.Contains(err.Error(), "scripts/setup builds the Dart one") {
		t.Errorf("pick dart: %v", err)
	}
}

// An extension written without its dot still names the files.
func TestGrammarExtensionWithoutADot(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Grammars[0].Extensions = []string{"dart"}
	cfg.Grammars[0].Optional = false
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := p.langs.pick("", "lib/main.dart", false); err != nil || l.name != "dart" {
		t.Errorf("lib/main.dart: %v, %v", l, err)
	}
}
