package structural

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/berth-dev/berth/internal/errclass"
)

// ErrRewrite is wrapped by every error about a rewrite template the
// model wrote.
// A case of invalid.
var ErrRewrite = errclass.Case("bad rewrite", errclass.ErrInvalid)

// segment is a piece of a rewrite template: literal text, or a variable.
type segment struct {
	text string
	v    *metaVar
}

// template is a compiled rewrite.
type template struct {
	segs []segment
}

// compileTemplate splits a rewrite into text and variables; every
// variable must be one the pattern binds.
func compileTemplate(src string, bound map[string]metaVar) (*template, error) {
	src = strings.ReplaceAll(src, "\r\n", "\n")
	t := &template{}
	lit := strings.Builder{}
	for i := 0; i < len(src); {
		if src[i] != '$' {
			lit.WriteByte(src[i])
			i++
			continue
		}
		v, k, ok := scanVar(src, i)
		if !ok || v.name == "" {
			if strings.HasPrefix(src[i:], "$$$") {
				return nil, fmt.Errorf("%w: it has $$$ without a name: name the run in the pattern ($$$ARGS) and use that name", ErrRewrite)
			}
			lit.WriteByte(src[i])
			i++
			continue
		}
		b, ok := bound[v.name]
		if !ok || v.anonymous() {
			return nil, fmt.Errorf("%w: it uses %s, which the pattern does not bind; the pattern binds %s: use those, or write the text itself", ErrRewrite, v, boundList(bound))
		}
		if lit.Len() > 0 {
			t.segs = append(t.segs, segment{text: lit.String()})
			lit.Reset()
		}
		t.segs = append(t.segs, segment{v: &b})
		i = k
	}
	if lit.Len() > 0 {
		t.segs = append(t.segs, segment{text: lit.String()})
	}
	return t, nil
}

func boundList(bound map[string]metaVar) string {
	if len(bound) == 0 {
		return "no variables"
	}
	var n []string
	for _, v := range bound {
		n = append(n, v.String())
	}
	sort.Strings(n)
	return strings.Join(n, ", ")
}

// render produces the replacement for one match at [start, end) of the
// file. Template lines after the first take the indentation of the line
// the match starts on; a multi-line capture is re-indented from where it
// stood to where it lands; line endings follow the file's (CRLF stays
// CRLF).
func (tp *template) render(t *tree, start uint32, ms []binding, crlf bool) string {
	src := t.src
	lineStart := bytes.LastIndexByte(src[:start], '\n') + 1
	matchIndent := leadingSpace(src[lineStart:])
	var out strings.Builder
	// lineHead is the text of the output line so far, as it will stand in
	// the file (the file's text before the match, on the first line).
	lineHead := string(src[lineStart:start])
	write := func(s string) {
		out.WriteString(s)
		if i := strings.LastIndexByte(s, '\n'); i >= 0 {
			lineHead = s[i+1:]
		} else {
			lineHead += s
		}
	}
	for si, sg := range tp.segs {
		if sg.v == nil {
			lines := strings.Split(sg.text, "\n")
			for i, ln := range lines {
				if i > 0 {
					write("\n")
					// Indent a line that gets content, from the template or
					// from a variable that follows.
					if ln != "" || i == len(lines)-1 && si+1 < len(tp.segs) {
						write(matchIndent)
					}
				}
				write(ln)
			}
			continue
		}
		text := captured(t, ms, sg.v.name)
		if !strings.Contains(text, "\n") {
			write(text)
			continue
		}
		b := bindingOf(ms, sg.v.name)
		cs, _, _ := b.span(t)
		capIndent := leadingSpace(src[bytes.LastIndexByte(src[:cs], '\n')+1:])
		landIndent := leadingSpace([]byte(lineHead))
		lines := strings.Split(text, "\n")
		for i, ln := range lines {
			if i > 0 {
				write("\n")
				if strings.TrimSpace(ln) != "" {
					ws := leadingSpace([]byte(ln))
					cut := min(len(ws), len(capIndent))
					ln = landIndent + ln[cut:]
				}
			}
			write(ln)
		}
	}
	s := out.String()
	if crlf {
		s = strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\r\n")
	}
	return s
}

// captured is the source text a variable captured: the node, or the run
// from its first to its last node ("" for an empty run).
func captured(t *tree, ms []binding, name string) string {
	b := bindingOf(ms, name)
	s, e, ok := b.span(t)
	if !ok {
		return ""
	}
	return string(t.src[s:e])
}

func bindingOf(ms []binding, name string) binding {
	for _, b := range ms {
		if b.v.name == name {
			return b
		}
	}
	return binding{}
}

func leadingSpace(b []byte) string {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	return string(b[:i])
}
