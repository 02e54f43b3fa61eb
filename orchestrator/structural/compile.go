package structural

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// patternParseTimeout bounds one parse of a pattern in one scaffold.
const patternParseTimeout = 2 * time.Second

// compile parses a pattern for language l.
func compile(ctx context.Context, l *language, src string) (*pattern, error) {
	snippet := strings.TrimSpace(src)
	if snippet == "" {
		return nil, fmt.Errorf("%w: the pattern is empty: pass a code snippet such as `fmt.Errorf($$$ARGS)` or `if ($X != null) $X.dispose()`", ErrPattern)
	}
	rewritten, vars := rewritePlaceholders(snippet, l.sigil)
	parser, err := newParser(l.lang)
	if err != nil {
		return nil, err
	}
	defer parser.close()
	var tried []string
	several := ""
	for _, sc := range l.ladder {
		t, lo, hi, msg, err := parseScaffold(ctx, parser, l, sc, rewritten, vars)
		if err != nil {
			return nil, err
		}
		if msg != "" {
			tried = append(tried, sc.name+": "+restore(msg, vars))
			continue
		}
		tops, ok := topNodes(t, 0, lo, hi, nil)
		if !ok || len(tops) == 0 {
			tried = append(tried, sc.name+": the snippet does not form whole nodes here")
			continue
		}
		if len(tops) > 1 && siblings(t, tops) {
			// Several statements (or members, declarations) in a row: a
			// pattern of N of them matches N consecutive siblings.
			p := &pattern{t: t, root: tops[0], seq: tops, context: inARow(namedCount(t, tops), sc.name)}
			if err := p.index(vars, lineComments[l.name]); err != nil {
				return nil, err
			}
			return p, nil
		}
		if len(tops) > 1 {
			if several == "" {
				several = fmt.Sprintf("as %s it is %d nodes (%s)", sc.name, len(tops), kindList(t, tops))
			}
			tried = append(tried, fmt.Sprintf("%s: %d top-level nodes", sc.name, len(tops)))
			continue
		}
		p := &pattern{t: t, root: descend(t, tops[0]), context: sc.name}
		if err := p.index(vars, lineComments[l.name]); err != nil {
			return nil, err
		}
		return p, nil
	}
	if several != "" {
		return nil, fmt.Errorf("%w: the pattern is several nodes, not one (%s): search for one statement or expression at a time, or for the enclosing block, e.g. `{ $$$BEFORE; a(); b(); $$$AFTER }`", ErrPattern, several)
	}
	return nil, fmt.Errorf("%w: the pattern is unparseable as %s code in any context; what each context made of it:\n  %s\nFix the snippet so it is valid code with $VARS where identifiers or expressions go", ErrPattern, l.name, strings.Join(tried, "\n  "))
}

// parseScaffold parses the snippet in one scaffold and returns the tree,
// the snippet's range in it, and its defects ("" if none).
func parseScaffold(ctx context.Context, parser *parser, l *language, sc scaffold, snippet string, vars map[string]metaVar) (t *tree, lo, hi uint32, msg string, err error) {
	at := strings.Index(sc.tmpl, "%s")
	if at < 0 {
		return nil, 0, 0, "the scaffold has no %s", nil
	}
	body := snippet
	if sc.indent {
		body = "    " + strings.ReplaceAll(body, "\n", "\n    ")
	}
	lo, hi = uint32(at), uint32(at+len(body))
	if l.terminator != "" {
		// A statement may leave out its terminator, and so may a $$$ run
		// of statements in a block. Parsed without one, `free(p)` is a C
		// declaration and `{ $$$B }` is no Java block; so parse with them
		// first, then take them out again.
		body2, inserted := withTerminators(body, vars, l.sigil, l.terminator, sc.statement)
		if len(inserted) > 0 {
			hi2 := uint32(at + len(body2))
			if inserted[len(inserted)-1] == len(body2)-len(l.terminator) {
				hi2 -= uint32(len(l.terminator))
			}
			t2, msg2, err := parseIn(ctx, parser, sc.tmpl[:at]+body2+sc.tmpl[at+2:], lo, hi2, sc.statement)
			if err != nil {
				return nil, 0, 0, "", err
			}
			ok := msg2 == ""
			for _, off := range inserted {
				ok = ok && dropTerminator(t2, uint32(at+off), l.terminator)
			}
			if tops, fits := topNodes(t2, 0, lo, hi2, nil); ok && fits && (len(tops) == 1 || len(tops) > 1 && siblings(t2, tops)) {
				return t2, lo, hi2, "", nil
			}
		}
	}
	t, msg, err = parseIn(ctx, parser, sc.tmpl[:at]+body+sc.tmpl[at+2:], lo, hi, sc.statement)
	return t, lo, hi, msg, err
}

// parseIn parses a scaffold's text and reports its defects ("" if none).
func parseIn(ctx context.Context, parser *parser, text string, lo, hi uint32, statement bool) (*tree, string, error) {
	// A grammar can loop on odd input (tree-sitter-dart 1.0.0 does on
	// `if (x != ) {`): a snippet that cannot parse quickly does not parse.
	pctx, cancel := context.WithTimeout(ctx, patternParseTimeout)
	defer cancel()
	t, err := parser.parse(pctx, []byte(text))
	if err != nil && ctx.Err() == nil {
		return nil, fmt.Sprintf("the parser gave up after %s", patternParseTimeout), nil
	}
	if err != nil {
		return nil, "", err
	}
	return t, defects(t, lo, hi, statement), nil
}

// withTerminators inserts term after each $$$ variable that ends a line
// or a block, and (for a statement) at the end of body; it returns the new body and where
// each inserted term starts in it, in order.
func withTerminators(body string, vars map[string]metaVar, sigil, term string, statement bool) (string, []int) {
	var cuts []int // offsets in body after which term goes
	for id, v := range vars {
		if !v.multi {
			continue
		}
		ph := sigil + id
		for off := 0; ; {
			i := strings.Index(body[off:], ph)
			if i < 0 {
				break
			}
			end := off + i + len(ph)
			rest := strings.TrimLeft(body[end:], " \t")
			if rest != "" && (rest[0] == '}' || rest[0] == '\n' || rest[0] == '\r') {
				cuts = append(cuts, end)
			}
			off = end
		}
	}
	if statement && !strings.HasSuffix(body, term) {
		cuts = append(cuts, len(body))
	}
	sort.Ints(cuts)
	var b strings.Builder
	var at []int
	prev := 0
	for _, c := range cuts {
		b.WriteString(body[prev:c])
		at = append(at, b.Len())
		b.WriteString(term)
		prev = c
	}
	b.WriteString(body[prev:])
	return b.String(), at
}

// dropTerminator turns the terminator inserted at hi into a zero-width
// MISSING token, as if the parser had supplied it, so the pattern does not
// require it and a rewrite does not replace it. It reports whether the
// terminator ended a node of the snippet.
func dropTerminator(t *tree, hi uint32, term string) bool {
	end := hi + uint32(len(term))
	found := false
	for i := range t.nodes {
		n := &t.nodes[i]
		if n.start == hi && n.end == end && n.size == 1 && !n.named() {
			n.flags |= fMissing
			n.end = hi
			found = true
		} else if n.start < hi && n.end == end {
			n.end = hi
		}
	}
	return found
}

// defects describes the ERROR and MISSING nodes of a scaffold parse, or
// returns "" if there are none that count. In a statement context a
// zero-width missing token at the end of the snippet is the absent
// terminator of its last statement and does not count.
func defects(t *tree, lo, hi uint32, statement bool) string {
	for i := range t.nodes {
		n := &t.nodes[i]
		switch {
		case n.flags&fError != 0:
			return fmt.Sprintf("syntax error at %q", clip(string(t.src[n.start:n.end]), 40))
		case n.missing():
			if statement && !n.named() && n.start >= hi && onlySpace(t.src[hi:n.start]) {
				continue
			}
			at := min(n.start, uint32(len(t.src)))
			return fmt.Sprintf("missing %q after %q", t.kindName(int32(i)), clip(string(t.src[min(lo, at):at]), 40))
		}
	}
	return ""
}

// topNodes collects the outermost nodes inside [lo, hi) under node i,
// skipping comments and missing tokens. ok is false when a leaf straddles
// a bound: the snippet merged with the scaffold's text.
func topNodes(t *tree, i int32, lo, hi uint32, acc []int32) ([]int32, bool) {
	n := &t.nodes[i]
	if n.end <= lo || n.start >= hi {
		return acc, true
	}
	if n.start >= lo && n.end <= hi {
		if n.extra() || n.missing() {
			return acc, true
		}
		return append(acc, i), true
	}
	if n.size == 1 {
		return acc, false
	}
	end := i + n.size
	ok := true
	for c := i + 1; c < end && ok; c += t.nodes[c].size {
		acc, ok = topNodes(t, c, lo, hi, acc)
	}
	return acc, ok
}

// siblings says whether nodes (in order, at least two) are children of
// one parent, the first and last of them named: statements in a row, not
// pieces of different constructs.
func siblings(t *tree, nodes []int32) bool {
	parent := parentOf(t, nodes[0])
	for _, n := range nodes[1:] {
		if parentOf(t, n) != parent {
			return false
		}
	}
	return t.nodes[nodes[0]].named() && t.nodes[nodes[len(nodes)-1]].named()
}

// namedCount counts the named nodes of a list (the statements of a
// sequence, not the separators between them).
func namedCount(t *tree, nodes []int32) int {
	n := 0
	for _, i := range nodes {
		if t.nodes[i].named() {
			n++
		}
	}
	return n
}

// inARow names a sequence pattern's context: "2 statements in a row".
func inARow(n int, context string) string {
	if context == "statement" {
		return fmt.Sprintf("%d statements in a row", n)
	}
	return fmt.Sprintf("%d nodes in a row (%s)", n, context)
}

// descend goes from a statement to what it wraps when the two span the
// same text, so `dispose(x)` is a call found anywhere, not only an
// expression statement.
func descend(t *tree, i int32) int32 {
	for {
		var only int32 = -1
		count := 0
		end := i + t.nodes[i].size
		for c := i + 1; c < end; c += t.nodes[c].size {
			if t.nodes[c].extra() || t.nodes[c].missing() {
				continue
			}
			only = c
			count++
		}
		if count != 1 || t.nodes[only].start != t.nodes[i].start || t.nodes[only].end != t.nodes[i].end {
			return i
		}
		i = only
	}
}
