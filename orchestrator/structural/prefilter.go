package structural

import (
	"bytes"
	"strconv"
	"strings"
)

// The token-run pre-filter skips a file before it is parsed when the file
// cannot hold a match: it lexes the file and requires the pattern's runs
// of literal tokens (the stretches between its variables) to appear in
// order. On a file without syntax errors it is never wrong, by these
// arguments:
//
//   - A match's leaves are the pattern's literal leaves, in order, with
//     text equal; variables cover whole nodes; the matcher also skips
//     unnamed tree nodes the pattern lacks (keywords, punctuation), lets
//     "," and ";" be absent, and ignores comments. So between two tokens of
//     a run the file may hold only keywords and punctuation, which the
//     check skips; "," and ";" are dropped from both streams, comments and
//     whitespace (Go's newline terminators) are never tokens.
//   - Punctuation is lexed one byte a token on both sides, so operators
//     the grammar splits or joins differently (">>", "...") compare alike.
//   - A string, raw string or rune literal is one token whatever it holds,
//     so the check never looks inside one, and "//" or "/*" in a string is
//     no comment.
//   - Where the lexer could disagree with the grammar's (an unterminated
//     literal or comment, a stray byte, a malformed number or escape, a
//     non-ASCII byte in code), the file is not filtered at all.
//
// A file with a syntax error is outside that argument in one case:
// tree-sitter's recovery may leave a string's quote out so its content
// parses as code, which the matcher could then match while the filter
// treats it as one literal and skips the file. That is the spec's side
// ("never a match inside a string literal"). Stray tokens recovery wraps
// in an ERROR node marked extra are not a gap: the matcher never steps
// over an ERROR node (tree.children), so `go foo func() {}()` matches
// `go func() { $$$B }()` for neither.
//
// Only languages with a lexer here (goLexer) get the filter; for others
// the pattern's words (token.in) are the only pre-filter.

// ptok is a lexed token: a word (identifier, keyword), a number, a
// literal (its content never counts), or one byte of punctuation.
type ptok struct {
	kind byte // tWord, tNum, tLit or tPunct
	text []byte
}

const (
	tWord byte = iota + 1
	tNum
	tLit
	tPunct
)

func (a ptok) equal(b ptok) bool {
	return a.kind == b.kind && (a.kind == tLit || bytes.Equal(a.text, b.text))
}

// lexer is one language's lexical rules for the pre-filter.
type lexer struct {
	// keywords are the words the grammar has as unnamed tokens, which the
	// matcher may skip in the file (node-types.json, "named": false).
	keywords map[string]bool
	// next returns the token at src[i:] and where the next search starts;
	// ok is false where the lexer cannot be sure it agrees with the
	// grammar's. A token's text ends at j. At the end it returns a zero
	// ptok.
	next func(src []byte, i int) (t ptok, j int, ok bool)
}

// lexers are the languages the token-run pre-filter knows.
var lexers = map[string]*lexer{
	"go": {keywords: wordSet("break case chan const continue default defer else fallthrough for func go goto if import interface map package range return select struct switch type var"), next: goNext},
}

func wordSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// skippable says whether the matcher may pass over t in the file when the
// pattern lacks it: punctuation and keywords, which may be unnamed nodes.
func (l *lexer) skippable(t ptok) bool {
	return t.kind == tPunct || t.kind == tWord && l.keywords[string(t.text)]
}

const maxRun = 62

// prefilter is a compiled token-run filter for one pattern.
type prefilter struct {
	lx   *lexer
	runs [][]ptok
	key  string // names the filter in a cache entry's list of what a file lacks
}

// newPrefilter builds the filter for pattern p in language lang, or
// returns nil when there is none (no lexer, no literal tokens, or a
// pattern the lexer cannot read with certainty).
func newPrefilter(lang string, p *pattern) *prefilter {
	lx := lexers[lang]
	if lx == nil {
		return nil
	}
	t := p.t
	if _, ok := p.vars[p.root]; ok && p.seq == nil {
		return nil
	}
	start, end := p.span()
	type span struct{ start, end int }
	var varSpans []span
	for i := range p.vars {
		varSpans = append(varSpans, span{int(t.nodes[i].start), int(t.nodes[i].end)})
	}
	inVar := func(a, b int) bool {
		for _, s := range varSpans {
			if a < s.end && b > s.start {
				return true
			}
		}
		return false
	}
	src := t.src[:end]
	var runs [][]ptok
	var cur []ptok
	for i := int(start); ; {
		tk, j, ok := lx.next(src, i)
		if !ok {
			return nil
		}
		if tk.kind == 0 {
			break
		}
		i = j
		if at := j - len(tk.text); inVar(at, j) {
			if len(cur) > 0 {
				runs, cur = append(runs, cur), nil
			}
			continue
		}
		cur = append(cur, tk)
	}
	if len(cur) > 0 {
		runs = append(runs, cur)
	}
	// admits tracks a run's progress in a 64-bit set: a longer run is
	// checked as consecutive shorter ones, which only admits more.
	for k := 0; k < len(runs); k++ {
		if len(runs[k]) > maxRun {
			runs = append(runs[:k+1], append([][]ptok{runs[k][maxRun:]}, runs[k+1:]...)...)
			runs[k] = runs[k][:maxRun]
		}
	}
	if len(runs) == 0 {
		return nil
	}
	var key strings.Builder
	key.WriteString("runs:")
	for _, r := range runs {
		key.WriteString(" [")
		for k, tk := range r {
			if k > 0 {
				key.WriteByte(' ')
			}
			if tk.kind == tLit {
				key.WriteString("<literal>")
			} else {
				key.Write(tk.text)
			}
		}
		key.WriteByte(']')
	}
	return &prefilter{lx: lx, runs: runs, key: key.String()}
}

// admits says whether src may hold a match: the runs appear in order,
// each with only skippable tokens between its own, or the lexer could not
// read src with certainty. Each run is taken where it first ends, which
// leaves the most room for the rest.
func (f *prefilter) admits(src []byte) bool {
	r := 0
	run := f.runs[0]
	// active bit k: the first k tokens of run are matched, ending at or
	// before the current token with only skippable ones since.
	var active uint64
	for i := 0; ; {
		tk, j, ok := f.lx.next(src, i)
		if !ok {
			return true
		}
		if tk.kind == 0 {
			return false
		}
		i = j
		next := uint64(0)
		skip := active != 0 && f.lx.skippable(tk)
		for k := 0; k < len(run); k++ {
			if k > 0 && active&(1<<k) == 0 {
				continue
			}
			if run[k].equal(tk) {
				next |= 1 << (k + 1)
			}
			if k > 0 && skip {
				next |= 1 << k
			}
		}
		if next&(1<<len(run)) != 0 {
			r++
			if r == len(f.runs) {
				return true
			}
			run, next = f.runs[r], 0
		}
		active = next
	}
}

// goNext lexes one Go token (the Go specification's lexical rules).
// Commas and semicolons are dropped, as the matcher lets them be absent.
func goNext(src []byte, i int) (ptok, int, bool) {
	for i < len(src) {
		c := src[i]
		switch {
		case goClass[c] == cSpace:
			i++
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			nl := bytes.IndexByte(src[i:], '\n')
			if nl < 0 {
				return ptok{}, len(src), true
			}
			i += nl + 1
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			end := bytes.Index(src[i+2:], []byte("*/"))
			if end < 0 {
				return ptok{}, i, false
			}
			i += 2 + end + 2
		case c == ',' || c == ';':
			i++
		case c == '"':
			j, ok := goString(src, i)
			return ptok{kind: tLit, text: src[i:j]}, j, ok
		case c == '`':
			end := bytes.IndexByte(src[i+1:], '`')
			if end < 0 {
				return ptok{}, i, false
			}
			return ptok{kind: tLit, text: src[i : i+1+end+1]}, i + 1 + end + 1, true
		case c == '\'':
			j, ok := goRune(src, i)
			return ptok{kind: tLit, text: src[i:j]}, j, ok
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(src) && isDigit(src[i+1]):
			return goNumber(src, i)
		case goClass[c] == cWord:
			j := i
			for j < len(src) && goClass[src[j]] == cWord {
				j++
			}
			if j < len(src) && src[j] >= 0x80 {
				return ptok{}, j, false
			}
			return ptok{kind: tWord, text: src[i:j]}, j, true
		case goClass[c] == cPunct:
			return ptok{kind: tPunct, text: src[i : i+1]}, i + 1, true
		default:
			// A non-ASCII identifier, or a byte no Go token has: the
			// grammar's reading of what follows is not certain.
			return ptok{}, i, false
		}
	}
	return ptok{}, i, true
}

// Byte classes of Go code outside literals and comments.
const (
	cOther byte = iota
	cSpace
	cWord
	cPunct
)

var goClass = func() (t [256]byte) {
	for c := 0; c < 256; c++ {
		switch {
		case isSpace(byte(c)) || c == '\f' || c == '\v':
			t[c] = cSpace
		case isWordByte(byte(c)):
			t[c] = cWord
		case strings.IndexByte("+-*/%&|^<>=!()[]{}.:~", byte(c)) >= 0:
			t[c] = cPunct
		}
	}
	return t
}()

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// goString scans an interpreted string literal from its opening quote.
func goString(src []byte, i int) (int, bool) {
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case '"':
			return j + 1, true
		case '\n':
			return j, false
		case '\\':
			n, ok := goEscape(src, j, '"')
			if !ok {
				return j, false
			}
			j += n - 1
		}
	}
	return len(src), false
}

// goRune scans a rune literal from its opening quote: one character or
// one escape, then the closing quote.
func goRune(src []byte, i int) (int, bool) {
	j := i + 1
	switch {
	case j >= len(src) || src[j] == '\'' || src[j] == '\n':
		return j, false
	case src[j] == '\\':
		n, ok := goEscape(src, j, '\'')
		if !ok {
			return j, false
		}
		j += n
	default:
		j++
		for j < len(src) && src[j]&0xC0 == 0x80 { // UTF-8 continuation bytes
			j++
		}
	}
	if j >= len(src) || src[j] != '\'' {
		return j, false
	}
	return j + 1, true
}

// goEscape returns the length of the escape sequence at src[j] (a
// backslash), valid in a literal quoted with q.
func goEscape(src []byte, j int, q byte) (int, bool) {
	if j+1 >= len(src) {
		return 0, false
	}
	digits := func(n int, ok func(byte) bool) (int, bool) {
		if j+2+n > len(src) {
			return 0, false
		}
		for _, c := range src[j+2 : j+2+n] {
			if !ok(c) {
				return 0, false
			}
		}
		return 2 + n, true
	}
	switch c := src[j+1]; {
	case strings.IndexByte(`abfnrtv\`, c) >= 0 || c == q:
		return 2, true
	case c == 'x':
		return digits(2, isHex)
	case c == 'u':
		return digits(4, isHex)
	case c == 'U':
		return digits(8, isHex)
	case c >= '0' && c <= '7':
		return digits(2, func(c byte) bool { return c >= '0' && c <= '7' })
	}
	return 0, false
}

func isHex(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// goNumber scans a number literal. Its text is taken whole (digits,
// letters, "_", ".", and a sign after an exponent letter) and must be a
// valid Go literal, else the lexer is not sure where the grammar's token
// ends.
func goNumber(src []byte, i int) (ptok, int, bool) {
	j := i
	hex := i+1 < len(src) && src[i] == '0' && (src[i+1] == 'x' || src[i+1] == 'X')
	plain := true
	for j < len(src) {
		c := src[j]
		if isWordByte(c) || c == '.' {
			if !isDigit(c) {
				plain = false
			}
			j++
			continue
		}
		if (c == '+' || c == '-') && j > i {
			p := src[j-1]
			if hex && (p == 'p' || p == 'P') || !hex && (p == 'e' || p == 'E') {
				j++
				continue
			}
		}
		break
	}
	if j < len(src) && src[j] >= 0x80 {
		return ptok{}, j, false
	}
	text := src[i:j]
	if !plain && !validNumber(string(text)) {
		return ptok{}, j, false
	}
	return ptok{kind: tNum, text: text}, j, true
}

// validNumber says whether s is a Go integer, floating-point or imaginary
// literal.
func validNumber(s string) bool {
	s = strings.TrimSuffix(s, "i")
	if _, err := strconv.ParseInt(s, 0, 64); err == nil || isRange(err) {
		return true
	}
	if strings.HasPrefix(s, "0b") || strings.HasPrefix(s, "0B") || strings.HasPrefix(s, "0o") || strings.HasPrefix(s, "0O") {
		return false
	}
	_, err := strconv.ParseFloat(s, 64)
	return err == nil || isRange(err)
}

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}
