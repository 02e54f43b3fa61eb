package docs

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/text"

	"github.com/berth-dev/berth/internal/markdown"
)

// root is the repository, seen from this package's directory.
const root = ".."

// Every relative link in README.md and docs/ names a file or directory
// that exists inside the repository, and every #anchor names a heading of
// its Markdown file, as GitHub computes heading ids.
func TestDocLinksResolve(t *testing.T) {
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(root, p)
			files = append(files, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("found only %v: the docs are missing", files)
	}
	anchors := map[string]map[string]bool{}
	checked := 0
	for _, file := range files {
		doc, err := parse(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range doc.links {
			checked++
			if msg := resolve(file, l, anchors); msg != "" {
				t.Errorf("%s:%d: link %q: %s", file, l.line, l.dest, msg)
			}
		}
	}
	t.Logf("%d links checked in %d files", checked, len(files))
}

// A link to a missing file, a missing heading or outside the repository
// is reported; one to a heading, a file or a web page is not.
func TestDocLinkCheckCatchesBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	md := "# Top\n\n## A `code` heading: yes\n\n## Top\n\n[ok](#a-code-heading-yes) [dup](#top-1) [web](https://example.com/x#y)\n" +
		"[gone](#nowhere) [file](missing.md) [up](../../../../../../etc/passwd)\n"
	if err := os.WriteFile(filepath.Join(dir, "a.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	doc, err := parseFile(filepath.Join(dir, "a.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]map[string]bool{}
	var bad []string
	for _, l := range doc.links {
		if msg := resolveIn(dir, "a.md", l, anchors); msg != "" {
			bad = append(bad, l.dest)
		}
	}
	if got, want := strings.Join(bad, " "), "#nowhere missing.md ../../../../../../etc/passwd"; got != want {
		t.Fatalf("broken links found: %q, want %q", got, want)
	}
}

type link struct {
	dest string
	line int
}

type document struct {
	links   []link
	anchors map[string]bool
}

var md = goldmark.New(goldmark.WithExtensions(extension.GFM))

func parse(file string) (*document, error) {
	return parseFile(filepath.Join(root, filepath.FromSlash(file)))
}

// parseFile reads a Markdown file's links and the anchors of its
// headings.
func parseFile(path string) (*document, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	tree := md.Parser().Parse(text.NewReader(src))
	doc := &document{anchors: map[string]bool{}}
	seen := map[string]int{}
	err = ast.Walk(tree, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Heading:
			id := markdown.Anchor(plain(n, src))
			if k := seen[id]; k > 0 {
				doc.anchors[fmt.Sprintf("%s-%d", id, k)] = true
			} else {
				doc.anchors[id] = true
			}
			seen[id]++
		case *ast.Link:
			doc.links = append(doc.links, link{string(n.Destination), lineOf(n, src)})
		case *ast.Image:
			doc.links = append(doc.links, link{string(n.Destination), lineOf(n, src)})
		}
		return ast.WalkContinue, nil
	})
	return doc, err
}

// plain is a heading's text as GitHub reads it for its id: the text of
// its code spans, emphasis and links, without their markup.
func plain(n ast.Node, src []byte) string {
	var b strings.Builder
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c := c.(type) {
		case *ast.Text:
			b.Write(c.Segment.Value(src))
		case *ast.String:
			b.Write(c.Value)
		default:
			b.WriteString(plain(c, src))
		}
	}
	return b.String()
}

// lineOf is the line of a link: of the first text it holds, else of its
// block.
func lineOf(n ast.Node, src []byte) int {
	for p := n; p != nil; p = p.Parent() {
		var start int = -1
		if t, ok := p.(*ast.Text); ok {
			start = t.Segment.Start
		} else if p.Type() == ast.TypeBlock && p.Lines().Len() > 0 {
			start = p.Lines().At(0).Start
		} else if c, ok := p.FirstChild().(*ast.Text); ok {
			start = c.Segment.Start
		}
		if start >= 0 {
			return 1 + strings.Count(string(src[:start]), "\n")
		}
	}
	return 0
}

func resolve(file string, l link, anchors map[string]map[string]bool) string {
	abs, err := filepath.Abs(root)
	if err != nil {
		return err.Error()
	}
	return resolveIn(abs, file, l, anchors)
}

// resolveIn checks one link of file (relative to top) and says what is
// wrong with it, or "".
func resolveIn(top, file string, l link, anchors map[string]map[string]bool) string {
	u, err := url.Parse(l.dest)
	if err != nil {
		return "does not parse: " + err.Error()
	}
	if u.Scheme != "" || u.Host != "" {
		return "" // a web page: not this test's to fetch
	}
	target := file
	if u.Path != "" {
		target = filepath.ToSlash(filepath.Join(filepath.Dir(file), u.Path))
		if target == ".." || strings.HasPrefix(target, "../") {
			return "leads out of the repository"
		}
		if _, err := os.Stat(filepath.Join(top, filepath.FromSlash(target))); err != nil {
			return "no such file or directory " + target
		}
	}
	if u.Fragment == "" {
		return ""
	}
	if !strings.HasSuffix(target, ".md") {
		return "an anchor into " + target + ", which is not Markdown"
	}
	a, ok := anchors[target]
	if !ok {
		doc, err := parseFile(filepath.Join(top, filepath.FromSlash(target)))
		if err != nil {
			return err.Error()
		}
		a = doc.anchors
		anchors[target] = a
	}
	if !a[u.Fragment] {
		return "no heading of " + target + " has the id " + u.Fragment
	}
	return ""
}
