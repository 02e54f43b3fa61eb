package structural

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// caseFile is one testdata/cases/<language>.yaml: patterns run against a
// source, with the matches, bindings and rewrites expected.
type caseFile struct {
	Language string     `yaml:"language"`
	Cases    []testCase `yaml:"cases"`
}

type testCase struct {
	Name    string `yaml:"name"`
	Pattern string `yaml:"pattern"`
	Source  string `yaml:"source"`
	// Context is the scaffold expected to accept the pattern.
	Context string `yaml:"context"`
	// Matches are "line:col" and, if any, " $X=text; $$$Y=text" with the
	// bindings sorted by name.
	Matches []string `yaml:"matches"`
	// Error is a substring of the compile error expected instead.
	Error   string `yaml:"error"`
	Rewrite string `yaml:"rewrite"`
	Want    string `yaml:"want"`
	Dropped int    `yaml:"dropped"`
}

var testLangs = func() *languages {
	ls, err := loadLanguages(DefaultConfig().Grammars)
	if err != nil {
		panic(err)
	}
	return ls
}()

func TestCases(t *testing.T) {
	files, err := filepath.Glob("testdata/cases/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no case files: %v", err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var cf caseFile
		if err := yaml.Unmarshal(b, &cf); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		l := testLangs.byName[cf.Language]
		if l == nil || l.lang == nil {
			t.Fatalf("%s: language %q is not available", file, cf.Language)
		}
		for _, c := range cf.Cases {
			t.Run(cf.Language+"/"+c.Name, func(t *testing.T) { runCase(t, l, c) })
		}
	}
}

func runCase(t *testing.T, l *language, c testCase) {
	ctx := context.Background()
	p, err := compile(ctx, l, c.Pattern)
	if c.Error != "" {
		if err == nil || !strings.Contains(err.Error(), c.Error) {
			t.Fatalf("pattern %q: want an error containing %q, got %v", c.Pattern, c.Error, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("pattern %q: %v", c.Pattern, err)
	}
	if c.Context != "" && p.context != c.Context {
		t.Errorf("pattern %q parsed as %s, want %s", c.Pattern, p.context, c.Context)
	}
	parser, err := newParser(l.lang)
	if err != nil {
		t.Fatal(err)
	}
	defer parser.close()
	tr, err := parser.parse(ctx, []byte(c.Source))
	if err != nil {
		t.Fatal(err)
	}
	ms := find(p, tr)
	got := []string{}
	for _, m := range ms {
		got = append(got, describeMatch(p, tr, m))
	}
	want := c.Matches
	if want == nil {
		want = []string{}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("pattern %q (as %s)\n got matches:\n  %s\nwant:\n  %s", c.Pattern, p.context, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if c.Rewrite == "" {
		return
	}
	tp, err := compileTemplate(c.Rewrite, p.bound)
	if err != nil {
		t.Fatal(err)
	}
	fm := &fileMatches{t: tr, matches: ms}
	edits, dropped := editTool{}.edits(&scope{p: p}, tp, fm)
	if out := string(applyEdits(tr.src, edits)); out != c.Want {
		t.Errorf("rewrite %q:\n got:\n%s\nwant:\n%s", c.Rewrite, out, c.Want)
	}
	if dropped != c.Dropped {
		t.Errorf("dropped %d overlapping matches, want %d", dropped, c.Dropped)
	}
}

func describeMatch(p *pattern, t *tree, m match) string {
	start, _ := p.extent(t, m)
	line, col := position(t.src, start)
	s := fmt.Sprintf("%d:%d", line, col)
	if b := bindingsText(t, m.bindings); b != "" {
		s += " " + strings.ReplaceAll(b, "\n", "; ")
	}
	return s
}
