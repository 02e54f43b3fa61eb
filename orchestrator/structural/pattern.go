package structural

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	sitter "github.com/tree-sitter/go-tree-sitter"
)

// patternParseTimeout bounds one parse of a pattern in one scaffold.
const patternParseTimeout = 2 * time.Second

// ErrPattern is wrapped by every error about a pattern the model wrote.
var ErrPattern = errors.New("bad pattern")

// pattern is a compiled pattern: a subtree of the snippet's parse inside
// the scaffold that accepted it.
type pattern struct {
	t       *tree
	root    int32
	context string // the scaffold that accepted the snippet
	// vars marks the pattern nodes that are variables.
	vars map[int32]metaVar
	// optional marks the "," beside a $$$ variable, which may be absent
	// when the run is empty: f($$$A, $B) matches f(x).
	optional map[int32]bool
	// kids are each node's children as matched: no comments, no
	// zero-width MISSING terminators.
	kids map[int32][]int32
	// bound lists the variables the pattern binds, by name.
	bound map[string]metaVar
	// tokens are literal words every match contains; a file lacking one
	// is skipped before it is parsed. Longest first.
	tokens [][]byte
	// trailing is the terminator the pattern's root left out ("dispose(x)"
	// as a Dart statement): a match ends before the file's own one, so a
	// rewrite keeps it.
	trailing string
}

// compile parses a pattern for language l.
func compile(ctx context.Context, l *language, src string) (*pattern, error) {
	snippet := strings.TrimSpace(src)
	if snippet == "" {
		return nil, fmt.Errorf("%w: the pattern is empty: pass a code snippet such as `fmt.Errorf($$$ARGS)` or `if ($X != null) $X.dispose()`", ErrPattern)
	}
	rewritten, vars := rewritePlaceholders(snippet, l.sigil)
	parser := sitter.NewParser()
	defer parser.Close()
	if err := parser.SetLanguage(l.lang); err != nil {
		return nil, err
	}
	var tried []string
	several := ""
	for _, sc := range l.ladder {
		at := strings.Index(sc.tmpl, "%s")
		if at < 0 {
			continue
		}
		body := rewritten
		if sc.indent {
			body = "    " + strings.ReplaceAll(body, "\n", "\n    ")
		}
		lo, hi := uint32(at), uint32(at+len(body))
		t, msg, err := parseIn(ctx, parser, l.lang, sc.tmpl[:at]+body+sc.tmpl[at+2:], lo, hi, sc.statement)
		if err != nil {
			return nil, err
		}
		if sc.statement && l.terminator != "" && !strings.HasSuffix(body, l.terminator) {
			// A statement may leave out its terminator. Parsed without
			// one, `free(p)` is a C declaration; so parse it with one
			// first, then take the terminator out again.
			t2, msg2, err := parseIn(ctx, parser, l.lang, sc.tmpl[:at]+body+l.terminator+sc.tmpl[at+2:], lo, hi, sc.statement)
			if err != nil {
				return nil, err
			}
			if msg2 == "" && dropTerminator(t2, hi, l.terminator) {
				if tops, ok := topNodes(t2, 0, lo, hi, nil); ok && len(tops) == 1 {
					t, msg = t2, ""
				}
			}
		}
		if msg != "" {
			tried = append(tried, sc.name+": "+msg)
			continue
		}
		tops, ok := topNodes(t, 0, lo, hi, nil)
		if !ok || len(tops) == 0 {
			tried = append(tried, sc.name+": the snippet does not form whole nodes here")
			continue
		}
		if len(tops) > 1 {
			if several == "" {
				several = fmt.Sprintf("as %s it is %d nodes (%s)", sc.name, len(tops), kindList(t, tops))
			}
			tried = append(tried, sc.name+": "+fmt.Sprintf("%d top-level nodes", len(tops)))
			continue
		}
		p := &pattern{t: t, root: descend(t, tops[0]), context: sc.name}
		if err := p.index(vars); err != nil {
			return nil, err
		}
		return p, nil
	}
	if several != "" {
		return nil, fmt.Errorf("%w: the pattern is several nodes, not one (%s): search for one statement or expression at a time, or for the enclosing block, e.g. `{ $$$BEFORE; a(); b(); $$$AFTER }`", ErrPattern, several)
	}
	return nil, fmt.Errorf("%w: the pattern is unparseable as %s code in any context; what each context made of it:\n  %s\nFix the snippet so it is valid code with $VARS where identifiers or expressions go", ErrPattern, l.name, strings.Join(tried, "\n  "))
}

// parseIn parses a scaffold's text and reports its defects ("" if none).
func parseIn(ctx context.Context, parser *sitter.Parser, lang *sitter.Language, text string, lo, hi uint32, statement bool) (*tree, string, error) {
	// A grammar can loop on odd input (tree-sitter-dart 1.0.0 does on
	// `if (x != ) {`): a snippet that cannot parse quickly does not parse.
	pctx, cancel := context.WithTimeout(ctx, patternParseTimeout)
	defer cancel()
	t, err := parse(pctx, parser, lang, []byte(text))
	if err != nil && ctx.Err() == nil {
		return nil, fmt.Sprintf("the parser gave up after %s", patternParseTimeout), nil
	}
	if err != nil {
		return nil, "", err
	}
	return t, defects(t, lo, hi, statement), nil
}

// dropTerminator turns the terminator appended at hi into a zero-width
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
			return fmt.Sprintf("missing %q after %q", t.kindName(int32(i)), clip(string(t.src[lo:min(n.start, uint32(len(t.src)))]), 40))
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

// index finds the variables, the matchable children of each node and the
// literal tokens of the pattern under p.root.
func (p *pattern) index(vars map[string]metaVar) error {
	t := p.t
	p.vars, p.optional, p.kids, p.bound = map[int32]metaVar{}, map[int32]bool{}, map[int32][]int32{}, map[string]metaVar{}
	seen := map[string]bool{}
	words := map[string]bool{}
	end := p.root + t.nodes[p.root].size
	var parents []int32
	for i := p.root; i < end; i++ {
		for len(parents) > 0 && i >= parents[len(parents)-1]+t.nodes[parents[len(parents)-1]].size {
			parents = parents[:len(parents)-1]
		}
		n := &t.nodes[i]
		parents = append(parents, i)
		if n.extra() || n.missing() {
			continue
		}
		var kids []int32
		for c := i + 1; c < i+n.size; c += t.nodes[c].size {
			if !t.nodes[c].extra() && !t.nodes[c].missing() {
				kids = append(kids, c)
			}
		}
		p.kids[i] = kids
		if len(kids) > 0 {
			continue
		}
		text := string(t.text(i))
		id := strings.TrimPrefix(text, "$")
		v, isVar := vars[id]
		if !isVar {
			if strings.Contains(text, placeholderPrefix) {
				return fmt.Errorf("%w: a pattern variable must stand alone as a whole token (an identifier or expression), not inside %q: use $NAME by itself", ErrPattern, clip(restore(text, vars), 60))
			}
			if isWord(text) {
				words[text] = true
			}
			continue
		}
		if prev, ok := p.bound[v.name]; ok && !v.anonymous() && prev.multi != v.multi {
			return fmt.Errorf("%w: $%s and $$$%s use one name for a single node and a run of nodes: rename one", ErrPattern, v.name, v.name)
		}
		seen[id] = true
		if !v.anonymous() {
			p.bound[v.name] = v
		}
		// The variable stands for the largest node that is nothing but it:
		// a statement that is just $S is any statement.
		at := i
		for k := len(parents) - 2; k >= 0; k-- {
			a := &t.nodes[parents[k]]
			if a.end != t.nodes[i].end || a.start > t.nodes[i].start || !onlySigil(t, parents[k], i) {
				break
			}
			at = parents[k]
		}
		p.vars[at] = v
	}
	for id, v := range vars {
		if !seen[id] {
			return fmt.Errorf("%w: %s sits inside a string, comment or larger token of the pattern, where it cannot match: put it where an identifier or expression goes", ErrPattern, v)
		}
	}
	// A "," beside a run variable may be absent when the run is empty.
	for _, kids := range p.kids {
		for k, c := range kids {
			v, ok := p.vars[c]
			if !ok || !v.multi {
				continue
			}
			for _, s := range []int{k - 1, k + 1} {
				if s >= 0 && s < len(kids) && !t.nodes[kids[s]].named() && string(t.text(kids[s])) == "," {
					p.optional[kids[s]] = true
				}
			}
		}
	}
	for c := p.root + t.nodes[p.root].size - 1; c > p.root; c-- {
		if t.nodes[c].extra() {
			continue
		}
		if t.nodes[c].missing() && !t.nodes[c].named() && parentOf(t, c) == p.root {
			p.trailing = t.kindName(c)
		}
		break
	}
	for w := range words {
		p.tokens = append(p.tokens, []byte(w))
	}
	sort.Slice(p.tokens, func(i, j int) bool {
		if len(p.tokens[i]) != len(p.tokens[j]) {
			return len(p.tokens[i]) > len(p.tokens[j])
		}
		return bytes.Compare(p.tokens[i], p.tokens[j]) < 0
	})
	return nil
}

// parentOf finds the parent of node c.
func parentOf(t *tree, c int32) int32 {
	for a := c - 1; a >= 0; a-- {
		if a+t.nodes[a].size > c {
			return a
		}
	}
	return -1
}

// onlySigil says whether ancestor a spans nothing but leaf i, or "$" and
// leaf i (a PHP variable).
func onlySigil(t *tree, a, i int32) bool {
	s := t.src[t.nodes[a].start:t.nodes[i].start]
	return len(s) == 0 || string(s) == "$"
}

// restore turns placeholder identifiers back into the variables the
// model wrote, for messages.
func restore(s string, vars map[string]metaVar) string {
	ids := make([]string, 0, len(vars))
	for id := range vars {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return len(ids[i]) > len(ids[j]) })
	for _, id := range ids {
		s = strings.ReplaceAll(s, id, vars[id].String())
	}
	return s
}

func isWord(s string) bool {
	if len(s) < 2 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func onlySpace(b []byte) bool { return len(bytes.TrimSpace(b)) == 0 }

func kindList(t *tree, is []int32) string {
	var k []string
	for _, i := range is {
		k = append(k, t.kindName(i))
	}
	return strings.Join(k, ", ")
}

// clip shortens s to n characters on one line.
func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", "⏎")
	r := []rune(s)
	if len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
