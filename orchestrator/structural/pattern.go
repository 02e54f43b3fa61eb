package structural

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/berth-dev/berth/internal/errclass"
)

// ErrPattern is wrapped by every error about a pattern the model wrote.
// A case of invalid.
var ErrPattern = errclass.Case("bad pattern", errclass.ErrInvalid)

// pattern is a compiled pattern: a subtree of the snippet's parse inside
// the scaffold that accepted it, or a run of sibling subtrees (statements
// in a row), which matches as many consecutive siblings in a file.
type pattern struct {
	t    *tree
	root int32
	// seq, for a run of siblings, lists them in order (with any
	// separator tokens between them); nil for one node. root is then the
	// first.
	seq     []int32
	context string // the scaffold that accepted the snippet
	// vars marks the pattern nodes that are variables.
	vars map[int32]metaVar
	// optional marks the separators and terminators ("," and ";") of the
	// pattern, which may be absent from the code: punctuation-only
	// differences do not count, so f($$$A, $B) matches f(x), and f(a, b,)
	// matches f(a, b).
	optional map[int32]bool
	// kids are each node's children as matched: no comments, no
	// zero-width MISSING terminators.
	kids map[int32][]int32
	// bound lists the variables the pattern binds, by name.
	bound map[string]metaVar
	// tokens are literal words every match contains; a file lacking one
	// is skipped before it is parsed. Longest first.
	tokens []token
	// trailing is the terminator the pattern's root left out ("dispose(x)"
	// as a Dart statement): a match ends before the file's own one, so a
	// rewrite keeps it.
	trailing string
}

// lineComments are the languages whose line comments start with "//" and
// that have no literal a "//" can hide in without a quote on the line
// (JavaScript's regular expressions can): there a word after "//" on a
// line without quotes is in a comment, or in a string, never code.
var lineComments = map[string]bool{
	"c": true, "cpp": true, "csharp": true, "dart": true, "go": true, "java": true, "php": true, "rust": true,
}

// last is the pattern's last top node: its root, or the last of its
// sequence.
func (p *pattern) last() int32 {
	if p.seq != nil {
		return p.seq[len(p.seq)-1]
	}
	return p.root
}

// span is the source range of the pattern in its scaffold.
func (p *pattern) span() (start, end uint32) {
	return p.t.nodes[p.root].start, p.t.nodes[p.last()].end
}

// index finds the variables, the matchable children of each node and the
// literal tokens of the pattern under p.root (every node of p.seq).
func (p *pattern) index(vars map[string]metaVar, slashComments bool) error {
	t := p.t
	p.vars, p.optional, p.kids, p.bound = map[int32]metaVar{}, map[int32]bool{}, map[int32][]int32{}, map[string]metaVar{}
	seen := map[string]bool{}
	words := map[string]bool{} // word → whether it must stand as a whole word
	last := p.last()
	end := last + t.nodes[last].size
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
		if !n.named() && (text == "," || text == ";") {
			p.optional[i] = true
		}
		id := strings.TrimPrefix(text, "$")
		v, isVar := vars[id]
		if !isVar {
			if strings.Contains(text, placeholderPrefix) {
				return fmt.Errorf("%w: a pattern variable must stand alone as a whole token (an identifier or expression), not inside %q: use $NAME by itself", ErrPattern, clip(restore(text, vars), 60))
			}
			if isWord(text) {
				// A keyword or an identifier is a whole word in the file: the
				// lexer never splits a word. Other leaves (string content)
				// may touch letters, so for them any occurrence counts.
				whole := !n.named() || strings.Contains(t.kindName(i), "identifier")
				words[text] = words[text] || whole
			} else if _, seen := words[text]; !seen && !n.named() && len(text) >= 2 && !strings.ContainsAny(text, " \t\r\n") {
				// An operator such as && or := must be there as written.
				words[text] = false
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
	for c := end - 1; c > last; c-- {
		if t.nodes[c].extra() {
			continue
		}
		if t.nodes[c].missing() && !t.nodes[c].named() && parentOf(t, c) == last {
			p.trailing = t.kindName(c)
		}
		break
	}
	for w, whole := range words {
		p.tokens = append(p.tokens, token{text: []byte(w), whole: whole, codeOnly: whole && slashComments})
	}
	sort.Slice(p.tokens, func(i, j int) bool {
		a, b := p.tokens[i].text, p.tokens[j].text
		if len(a) != len(b) {
			return len(a) > len(b)
		}
		return bytes.Compare(a, b) < 0
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
