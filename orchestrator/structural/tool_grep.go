package structural

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/orchestrator"
)

// grepTool is ast_grep: a read-tier search that changes nothing.
type grepTool struct{ p *Provider }

type grepArgs struct {
	Pattern    string `json:"pattern"`
	Path       string `json:"path"`
	Language   string `json:"language"`
	MaxResults int    `json:"max_results"`
}

func (g grepTool) Spec() orchestrator.Spec {
	return orchestrator.Spec{
		Name: "ast_grep",
		Tier: orchestrator.Read,
		Description: "Structural search: finds code by its syntax tree, not its text. pattern is a code snippet in the target language with " +
			"$NAME for any one node, $$$NAME for a run of sibling nodes (arguments, statements), $_ and $$$ for wildcards that bind nothing; " +
			"a variable used twice must match the same code (`if ($X != null) $X.dispose()`); several statements match as many consecutive statements. " +
			"Whitespace, line breaks and comments do not matter, " +
			"and nothing inside a string or comment matches. path is a file or folder in the workspace (default: all of it; .gitignore'd and hidden files are skipped, " +
			"and binary, very large and unreadable ones are skipped and named in the result); " +
			"language (" + strings.Join(languageIDs(g.p), ", ") + ") is inferred from a file path and required for a folder; " +
			"a file that is another language's by its extension is refused, not parsed as the one named (a .h file is c or cpp). " +
			"Returns each match as path:line:col, its first source lines and what each variable captured ($X = …), sorted by path and position, " +
			"at most max_results (default 50; the result says \"showing K of N\" when there are more).",
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "description": "code snippet with $NAME / $$$NAME / $_ variables"},
    "path": {"type": "string", "description": "file or folder inside the workspace; default the whole workspace"},
    "language": {"type": "string", "description": "grammar id; inferred when path names a file"},
    "max_results": {"type": "integer", "minimum": 1, "description": "default 50"}
  },
  "required": ["pattern"],
  "additionalProperties": false
}`),
		ParallelSafe: true,
	}
}

func (g grepTool) Call(ctx context.Context, run *orchestrator.Run, raw json.RawMessage) (*orchestrator.Result, error) {
	var a grepArgs
	if r := decode(raw, &a); r != nil {
		return r, nil
	}
	sc, res, err := g.p.prepare(ctx, run, a.Path, a.Language, a.Pattern)
	if sc == nil {
		return res, err
	}
	found, err := g.p.search(ctx, sc)
	if err != nil {
		return nil, err
	}
	if found.none != "" {
		return noFiles(sc, found.none), nil
	}
	limit := a.MaxResults
	if limit <= 0 {
		limit = g.p.cfg.MaxResults
	}
	// One form: the text, which is what a model reads. A table of the same
	// rows beside it doubled every match and added nothing.
	var (
		shown int
		list  strings.Builder
	)
	for _, f := range found.files {
		for _, m := range f.matches {
			if shown == limit {
				break
			}
			start, end := sc.p.extent(f.t, m)
			line, col := position(f.t.src, start)
			loc := fmt.Sprintf("%s:%d:%d", text.Path(f.rel), line, col)
			writeMatch(&list, loc, firstLines(string(f.t.src[start:end]), matchLines), bindingsText(f.t, m.bindings))
			shown++
		}
	}
	files := len(found.files)
	head := fmt.Sprintf("%d match(es) in %d file(s) for %s pattern (parsed as %s)", found.total, files, sc.l.name, sc.p.context)
	if found.total == 0 {
		head = fmt.Sprintf("no matches for %s pattern (parsed as %s)", sc.l.name, sc.p.context)
	}
	if found.total > shown {
		head += fmt.Sprintf("; showing %d of %d: narrow path or raise max_results to see more", shown, found.total)
	}
	head += skippedNote(found.skipped)
	if list.Len() > 0 {
		head += "\n\n" + strings.TrimSuffix(list.String(), "\n")
	}
	return orchestrator.Text(head), nil
}

// matchLines is how many lines of a match's source a result shows;
// matchLineRunes caps each of them, so a minified file cannot flood it.
const (
	matchLines     = 3
	matchLineRunes = 200
)

// writeMatch adds one match to the text: its location on a line of its
// own, then its source lines marked "  | ", then one "  $X = …" line per
// binding.
func writeMatch(b *strings.Builder, loc, src, binds string) {
	b.WriteString(loc + "\n")
	for _, l := range strings.Split(src, "\n") {
		b.WriteString("  | " + l + "\n")
	}
	if binds != "" {
		for _, l := range strings.Split(binds, "\n") {
			b.WriteString("  " + l + "\n")
		}
	}
}

// bindingsText lists what each named variable captured, one per line.
func bindingsText(t *tree, bs []binding) string {
	sorted := append([]binding(nil), bs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].v.name < sorted[j].v.name })
	var lines []string
	for _, b := range sorted {
		s, e, ok := b.span(t)
		val := ""
		if ok {
			val = clip(string(t.src[s:e]), 80)
		}
		lines = append(lines, fmt.Sprintf("%s = %s", b.v, val))
	}
	return strings.Join(lines, "\n")
}

// firstLines keeps the first n lines of s, each at most matchLineRunes
// characters, saying how many lines were cut.
func firstLines(s string, n int) string {
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	more := len(lines) - n
	if more > 0 {
		lines = lines[:n]
	}
	for i, l := range lines {
		if r := []rune(l); len(r) > matchLineRunes {
			lines[i] = string(r[:matchLineRunes]) + "…"
		}
	}
	if more > 0 {
		lines = append(lines, fmt.Sprintf("… (%d more %s)", more, text.Plural(more, "line")))
	}
	return strings.Join(lines, "\n")
}

func languageIDs(p *Provider) []string {
	var ids []string
	for _, n := range p.langs.names() {
		if p.langs.byName[n].lang != nil {
			ids = append(ids, n)
		}
	}
	return ids
}
