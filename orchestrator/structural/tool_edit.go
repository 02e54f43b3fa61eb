package structural

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// editTool is ast_edit: it searches as ast_grep does and stages the
// rewritten files in the run; only resolve writes them.
type editTool struct{ p *Provider }

type editArgs struct {
	Pattern  string `json:"pattern"`
	Rewrite  string `json:"rewrite"`
	Path     string `json:"path"`
	Language string `json:"language"`
}

func (e editTool) Spec() orchestrator.Spec {
	return orchestrator.Spec{
		Name: "ast_edit",
		Tier: orchestrator.Write,
		Description: "Structural rewrite, staged: finds pattern exactly as ast_grep does and replaces each match with rewrite, in which $NAME is " +
			"replaced by what the variable captured and $$$NAME by the captured run from its first to its last node. Nothing is written: " +
			"the result is a proposal (count of replacements and files, a diff preview, files whose rewrite would not parse) with an edit_id; " +
			"call resolve with that edit_id and action accept to write every file, or discard to drop it. " +
			"Where matches overlap, the outer one is kept. path and language as in ast_grep.",
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "description": "what to match, with $NAME / $$$NAME / $_ variables"},
    "rewrite": {"type": "string", "description": "what to put there, with the pattern's $NAME substituted"},
    "path": {"type": "string", "description": "file or folder inside the workspace; default the whole workspace"},
    "language": {"type": "string", "description": "grammar id; inferred when path names a file"}
  },
  "required": ["pattern", "rewrite"],
  "additionalProperties": false
}`),
		ParallelSafe: true,
	}
}

func (e editTool) Call(ctx context.Context, run *orchestrator.Run, raw json.RawMessage) (*orchestrator.Result, error) {
	var a editArgs
	if r := decode(raw, &a); r != nil {
		return r, nil
	}
	sc, res, err := e.p.prepare(ctx, run, a.Path, a.Language, a.Pattern)
	if sc == nil {
		return res, err
	}
	tp, err := compileTemplate(a.Rewrite, sc.p.bound)
	if err != nil {
		return orchestrator.Errorf("%v", err), nil
	}
	found, err := e.p.search(ctx, sc)
	if err != nil {
		return nil, err
	}
	if found.none != "" {
		return noFiles(sc, found.none), nil
	}
	if found.total == 0 {
		return orchestrator.Textf("no matches for %s pattern (parsed as %s): nothing staged%s", sc.l.name, sc.p.context, skippedNote(found.skipped)), nil
	}

	parser, err := newParser(sc.l.lang)
	if err != nil {
		return nil, err
	}
	defer parser.close()
	var (
		staged              []stagedFile
		diff, flags         []string
		replacements, dropd int
	)
	for _, f := range found.files {
		edits, dropped := e.edits(sc, tp, f)
		dropd += dropped
		if len(edits) == 0 {
			continue
		}
		newSrc := applyEdits(f.t.src, edits)
		if bytes.Equal(newSrc, f.t.src) {
			continue
		}
		nt, err := parser.parse(ctx, newSrc)
		if err != nil {
			return nil, err
		}
		if nt.errors > f.t.errors {
			n, at := newErrors(f.t, nt, edits)
			flags = append(flags, fmt.Sprintf("  %s: the rewritten file has %d new syntax error(s), the first at %s", text.Path(f.rel), n, at))
		}
		content := newSrc
		if f.bom {
			content = append(append([]byte(nil), bom...), newSrc...)
		}
		staged = append(staged, stagedFile{path: f.path, rel: f.rel, expected: workspace.Hash(f.content()), content: content})
		replacements += len(edits)
		diff = append(diff, unifiedDiff(text.Path(f.rel), f.t.src, edits)...)
	}
	if len(staged) == 0 {
		return orchestrator.Textf("%d match(es), but the rewrite leaves every one unchanged: nothing staged", found.total), nil
	}
	// A file the container has read-only could not be written by resolve
	// (issue 24 item 5): say so now, not after the model accepts.
	for _, f := range staged {
		if err := sc.root.CheckWritable(f.path); err != nil {
			return orchestrator.Errorf("nothing staged: %v", err), nil
		}
	}
	id := sc.state.stage(staged, replacements)

	var b strings.Builder
	fmt.Fprintf(&b, "(proposed) %s in %s", text.Count(replacements, "replacement"), text.Count(len(staged), "file"))
	if dropd > 0 {
		fmt.Fprintf(&b, "; %d overlapping match(es) inside others were dropped (the outer one wins)", dropd)
	}
	fmt.Fprintf(&b, "; nothing is written yet: call resolve with edit_id %q and action \"accept\" to write, or \"discard\"", id)
	if len(flags) > 0 {
		fmt.Fprintf(&b, "\nWARNING: the rewrite breaks the syntax of %d file(s); check the rewrite before accepting:\n%s", len(flags), strings.Join(flags, "\n"))
	}
	b.WriteString(skippedNote(found.skipped))
	limit := e.p.cfg.DiffLines
	if len(diff) > limit {
		more := len(diff) - limit
		diff = append(diff[:limit:limit], fmt.Sprintf("… diff cut at %d lines (%d more)", limit, more))
	}
	b.WriteString("\n\n" + strings.Join(diff, "\n"))
	return orchestrator.Text(b.String()), nil
}

// edits renders the replacements of one file, keeping the outer of
// overlapping matches; dropped counts the others.
func (e editTool) edits(sc *scope, tp *template, f *fileMatches) (out []edit, dropped int) {
	crlf := bytes.Contains(f.t.src, []byte("\r\n"))
	type span struct {
		start, end uint32
		m          match
	}
	var spans []span
	for _, m := range f.matches {
		s, en := sc.p.extent(f.t, m)
		spans = append(spans, span{s, en, m})
	}
	sort.SliceStable(spans, func(i, j int) bool {
		if spans[i].start != spans[j].start {
			return spans[i].start < spans[j].start
		}
		return spans[i].end > spans[j].end
	})
	var lastEnd uint32
	for i, s := range spans {
		if i > 0 && s.start < lastEnd {
			dropped++
			continue
		}
		out = append(out, edit{start: s.start, end: s.end, text: tp.render(f.t, s.start, s.m.bindings, crlf)})
		lastEnd = s.end
	}
	return out, dropped
}

// newErrors counts the syntax errors of nt, the tree of old's source
// with edits made, that old did not have, and says where the first of
// them is, as line:col. Only the innermost error nodes count: error
// recovery may wrap much of a file, from 1:1, in an ERROR node around the
// one it could not parse, and the place to look at is the inner one. An
// error old had, moved by the edits, is not new. Where an error node
// begins before the first edit it spans, that edit is where it is.
func newErrors(old, nt *tree, edits []edit) (count int, at string) {
	type key struct {
		start, end uint32
		kind       uint16
		flags      uint8
	}
	had := map[key]int{}
	for _, i := range old.innermostErrors() {
		n := &old.nodes[i]
		s, ok1 := shifted(n.start, edits)
		e, ok2 := shifted(n.end, edits)
		if ok1 && ok2 {
			had[key{s, e, n.kind, n.flags}]++
		}
	}
	inner := nt.innermostErrors()
	first := int32(-1)
	for _, i := range inner {
		n := &nt.nodes[i]
		if k := (key{n.start, n.end, n.kind, n.flags}); had[k] > 0 {
			had[k]--
			continue
		}
		if first < 0 {
			first = i
		}
		count++
	}
	if first < 0 && len(inner) > 0 {
		// Every error matches one the file had; the count says there are
		// more, so the edits moved one onto another's place.
		first = inner[0]
	}
	if count == 0 {
		count = nt.errors - old.errors
	}
	if first < 0 {
		return count, "an unknown place"
	}
	n := &nt.nodes[first]
	off := n.start
	var delta int64
	for _, e := range edits {
		ns := uint32(int64(e.start) + delta)
		delta += int64(len(e.text)) - int64(e.end-e.start)
		ne := uint32(int64(e.end) + delta)
		if ne <= n.start && ns < n.start {
			continue // wholly before the node
		}
		if ns > n.start && ns < n.end {
			off = ns
		}
		break
	}
	line, col := position(nt.src, off)
	return count, fmt.Sprintf("%d:%d", line, col)
}

// shifted maps an offset of the source before edits to the source after
// them; an offset inside an edit's replaced text has no counterpart.
func shifted(off uint32, edits []edit) (uint32, bool) {
	var delta int64
	for _, e := range edits {
		if off <= e.start {
			break
		}
		if off < e.end {
			return 0, false
		}
		delta += int64(len(e.text)) - int64(e.end-e.start)
	}
	return uint32(int64(off) + delta), true
}
