package structural

import (
	"bytes"
	"sort"
)

// binding is what one variable captured: a node, or a run of sibling
// nodes (possibly empty) for $$$.
type binding struct {
	v     metaVar
	nodes []int32
}

// match is one place a pattern matched: a node, or for a sequence
// pattern the siblings from node to last.
type match struct {
	node, last int32
	bindings   []binding
}

// matcher matches one pattern against one tree.
type matcher struct {
	p   *pattern
	t   *tree
	env []binding
	// open lets the top-level list of a sequence pattern end before the
	// tree's list does; rest is then how many tree nodes were left.
	open bool
	rest int
}

// find returns every match in the tree, in source order. Comments are
// never searched: a pattern does not match inside one.
func find(p *pattern, t *tree) []match {
	if p.seq != nil {
		return findSeq(p, t)
	}
	m := &matcher{p: p, t: t}
	var out []match
	root := &p.t.nodes[p.root]
	_, rootVar := p.vars[p.root]
	for i := int32(0); i < int32(len(t.nodes)); i++ {
		n := &t.nodes[i]
		if n.extra() {
			i += n.size - 1
			continue
		}
		if !rootVar && n.kind != root.kind || n.flags&(fError|fMissing) != 0 {
			continue
		}
		m.env = m.env[:0]
		if m.node(p.root, i) {
			out = append(out, match{node: i, last: i, bindings: append([]binding(nil), m.env...)})
		}
	}
	return out
}

// findSeq finds a sequence pattern: in every node's children, runs of
// consecutive siblings that match the pattern's, from a named child on,
// in source order; a run found is not searched again from inside it.
func findSeq(p *pattern, t *tree) []match {
	var (
		out []match
		buf []int32
	)
	first := &p.t.nodes[p.root]
	_, firstVar := p.vars[p.root]
	for i := int32(0); i < int32(len(t.nodes)); i++ {
		n := &t.nodes[i]
		if n.extra() {
			i += n.size - 1
			continue
		}
		if n.size == 1 || n.flags&(fError|fMissing) != 0 {
			continue
		}
		buf = t.children(i, buf)
		kids := append([]int32(nil), buf...)
		for k := 0; k < len(kids); k++ {
			c := &t.nodes[kids[k]]
			if !c.named() || !firstVar && c.kind != first.kind {
				continue
			}
			m := &matcher{p: p, t: t, open: true}
			if !m.seq(p.seq, kids[k:]) {
				continue
			}
			used := len(kids) - k - m.rest
			out = append(out, match{node: kids[k], last: kids[k+used-1], bindings: m.env})
			k += used - 1
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].node < out[b].node })
	return out
}

// node matches pattern node pi against tree node ti.
func (m *matcher) node(pi, ti int32) bool {
	pn, tn := &m.p.t.nodes[pi], &m.t.nodes[ti]
	if v, ok := m.p.vars[pi]; ok {
		if !tn.named() || tn.missing() {
			return false
		}
		return m.bind(v, []int32{ti})
	}
	if pn.kind != tn.kind {
		return false
	}
	pk := m.p.kids[pi]
	if len(pk) == 0 {
		return bytes.Equal(m.p.t.text(pi), m.t.text(ti))
	}
	// Only the top-level list of a sequence may end early: a node's
	// children match in full.
	open := m.open
	m.open = false
	ok := m.seq(pk, m.t.children(ti, nil))
	m.open = open
	return ok
}

// seq matches a list of pattern children against a list of tree
// children. A $$$ variable tries every run length, shortest first, and
// backtracks; an unnamed tree node (punctuation) the pattern lacks may be
// skipped, a named one may not.
func (m *matcher) seq(ps, ts []int32) bool {
	if len(ps) == 0 && m.open {
		m.rest = len(ts)
		return true
	}
	if len(ps) == 0 {
		for _, t := range ts {
			if m.t.nodes[t].named() {
				return false
			}
		}
		return true
	}
	p := ps[0]
	mark := len(m.env)
	if v, ok := m.p.vars[p]; ok && v.multi {
		for k := 0; k <= len(ts); k++ {
			if m.bind(v, ts[:k]) && m.seq(ps[1:], ts[k:]) {
				return true
			}
			m.env = m.env[:mark]
		}
		return false
	}
	if m.p.optional[p] {
		if m.seq(ps[1:], ts) {
			return true
		}
		m.env = m.env[:mark]
	}
	if len(ts) == 0 {
		return false
	}
	if m.node(p, ts[0]) && m.seq(ps[1:], ts[1:]) {
		return true
	}
	m.env = m.env[:mark]
	if !m.t.nodes[ts[0]].named() {
		return m.seq(ps, ts[1:])
	}
	return false
}

// bind records what v captured; a variable seen before must have
// captured the same code, compared by structure so formatting and
// comments do not count.
func (m *matcher) bind(v metaVar, nodes []int32) bool {
	if v.anonymous() {
		return true
	}
	named := namedOnly(m.t, nodes)
	for _, b := range m.env {
		if b.v.name != v.name {
			continue
		}
		prev := namedOnly(m.t, b.nodes)
		if len(prev) != len(named) {
			return false
		}
		for i := range prev {
			if !equalTrees(m.t, prev[i], named[i]) {
				return false
			}
		}
		return true
	}
	m.env = append(m.env, binding{v: v, nodes: nodes})
	return true
}

// namedOnly drops the punctuation between the nodes of a run.
func namedOnly(t *tree, nodes []int32) []int32 {
	var out []int32
	for _, n := range nodes {
		if t.nodes[n].named() {
			out = append(out, n)
		}
	}
	return out
}

// equalTrees compares two subtrees by kind, children and leaf text. A
// node that only wraps another (an expression list of one expression) is
// compared as what it wraps, since a variable may have captured either.
func equalTrees(t *tree, a, b int32) bool {
	a, b = unwrap(t, a), unwrap(t, b)
	na, nb := &t.nodes[a], &t.nodes[b]
	if na.kind != nb.kind {
		return false
	}
	ka, kb := t.children(a, nil), t.children(b, nil)
	if len(ka) != len(kb) {
		return false
	}
	if len(ka) == 0 {
		return bytes.Equal(t.text(a), t.text(b))
	}
	for i := range ka {
		if !equalTrees(t, ka[i], kb[i]) {
			return false
		}
	}
	return true
}

// unwrap goes down from node i while it has one child of the same extent.
func unwrap(t *tree, i int32) int32 {
	for {
		k := t.children(i, nil)
		if len(k) != 1 || t.nodes[k[0]].start != t.nodes[i].start || t.nodes[k[0]].end != t.nodes[i].end {
			return i
		}
		i = k[0]
	}
}

// span is the source range a binding covers: from its first to its last
// named node (empty for an empty run).
func (b binding) span(t *tree) (start, end uint32, ok bool) {
	named := namedOnly(t, b.nodes)
	if len(named) == 0 {
		return 0, 0, false
	}
	start, end = t.nodes[named[0]].start, t.nodes[named[len(named)-1]].end
	// A statement list can end in the newline that terminates its last
	// statement; the capture is the code, not that.
	for end > start && isSpace(t.src[end-1]) {
		end--
	}
	return start, end, true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// extent is the source range a match covers. When the pattern left out
// its (last) statement's terminator, the match stops before the file's
// one.
func (p *pattern) extent(t *tree, m match) (start, end uint32) {
	start, end = t.nodes[m.node].start, t.nodes[m.last].end
	if p.trailing == "" {
		return start, end
	}
	kids := t.children(m.last, nil)
	if k := len(kids); k >= 2 && !t.nodes[kids[k-1]].named() && string(t.text(kids[k-1])) == p.trailing {
		end = t.nodes[kids[k-2]].end
	}
	return start, end
}

// token is a literal word of a pattern, for the pre-filter.
type token struct {
	text  []byte
	whole bool // it must occur as a whole word, not inside a longer one
	// codeOnly: an occurrence in a // comment does not count (//go:build,
	// "// go to"), in the languages of lineComments.
	codeOnly bool
}

// key names the token in a cache entry's list of words a file lacks.
func (w token) key() string {
	if w.whole {
		return string(w.text) + " (word)"
	}
	return string(w.text)
}

// in says whether src contains the token.
func (w token) in(src []byte) bool {
	for off := 0; ; {
		i := bytes.Index(src[off:], w.text)
		if i < 0 {
			return false
		}
		i += off
		end := i + len(w.text)
		whole := (i == 0 || !isWordByte(src[i-1])) && (end == len(src) || !isWordByte(src[end]))
		if !w.whole || whole && !(w.codeOnly && inLineComment(src, i)) {
			return true
		}
		off = i + 1
	}
}

// inLineComment says whether offset i is surely not code: its line has a
// "//" before i, no quote anywhere before i, and no "*/" between the two.
// Without quotes the "//" starts a comment, unless the line began inside
// a multi-line string or comment, which then runs past i as well; a "*/"
// could end a block comment the "//" was in, so it leaves the answer open.
func inLineComment(src []byte, i int) bool {
	line := src[bytes.LastIndexByte(src[:i], '\n')+1 : i]
	j := bytes.Index(line, []byte("//"))
	return j >= 0 && !bytes.ContainsAny(line, "\"'`") && !bytes.Contains(line[j:], []byte("*/"))
}

// isWordByte: ASCII letters, digits and "_". Other bytes count as
// boundaries, which can only let a file through, never skip one wrongly.
func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
