// Package jsonscan reads JSON from bytes, token by token, without
// reflection or a tree of values: for the few hot paths where
// encoding/json's cost shows (a tool's result on the protocol, the check
// of a tool's arguments). It accepts strict JSON only and says so with a
// bool; anything it does not take on (a repeated key in an object, a
// surrogate escape in a string, invalid UTF-8) fails too, so its callers
// fall back on encoding/json, which then decides.
package jsonscan

import (
	"strconv"
	"unicode/utf8"
)

// Scanner reads one JSON text. Each method skips leading whitespace and
// says whether it read what it expected; after a false the position is
// unspecified and the caller gives up.
type Scanner struct {
	b     []byte
	i     int
	depth int // objects and arrays open
}

// maxDepth bounds nesting: deeper input fails (and goes to encoding/json,
// which has its own bound), instead of growing the stack without end.
const maxDepth = 1000

// New returns a scanner at the start of b.
func New(b []byte) *Scanner { return &Scanner{b: b} }

func (p *Scanner) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// End says only whitespace is left.
func (p *Scanner) End() bool {
	p.ws()
	return p.i == len(p.b)
}

// Peek returns the next byte that is not whitespace, or 0 at the end.
func (p *Scanner) Peek() byte {
	p.ws()
	if p.i == len(p.b) {
		return 0
	}
	return p.b[p.i]
}

// Token reads a literal.
func (p *Scanner) Token(t string) bool {
	p.ws()
	if len(p.b)-p.i < len(t) || string(p.b[p.i:p.i+len(t)]) != t {
		return false
	}
	p.i += len(t)
	return true
}

// Null reads null.
func (p *Scanner) Null() bool { return p.Token("null") }

// Bool reads true or false into v.
func (p *Scanner) Bool(v *bool) bool {
	switch {
	case p.Token("true"):
		*v = true
	case p.Token("false"):
		*v = false
	default:
		return false
	}
	return true
}

// Object reads an object, calling member for each key with the scanner
// at its value; a key that comes twice fails.
func (p *Scanner) Object(member func(key string) bool) bool {
	if p.depth == maxDepth || !p.Token("{") {
		return false
	}
	p.depth++
	defer func() { p.depth-- }()
	if p.Token("}") {
		return true
	}
	var seen []string            // the keys so far, while few
	var many map[string]struct{} // then a set: no quadratic walk on a huge object
	for {
		key, ok := p.String()
		if !ok || !p.Token(":") {
			return false
		}
		if many != nil {
			if _, dup := many[key]; dup {
				return false
			}
			many[key] = struct{}{}
		} else {
			for _, k := range seen {
				if k == key {
					return false
				}
			}
			if seen = append(seen, key); len(seen) > 16 {
				many = make(map[string]struct{}, 64)
				for _, k := range seen {
					many[k] = struct{}{}
				}
			}
		}
		if !member(key) {
			return false
		}
		if p.Token("}") {
			return true
		}
		if !p.Token(",") {
			return false
		}
	}
}

// Array reads an array, calling elem with the scanner at each element.
func (p *Scanner) Array(elem func() bool) bool {
	if p.depth == maxDepth || !p.Token("[") {
		return false
	}
	p.depth++
	defer func() { p.depth-- }()
	if p.Token("]") {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if p.Token("]") {
			return true
		}
		if !p.Token(",") {
			return false
		}
	}
}

// Strings reads an array of strings (never nil), or null (nil).
func (p *Scanner) Strings() ([]string, bool) {
	if p.Null() {
		return nil, true
	}
	ss := []string{}
	ok := p.Array(func() bool {
		s, ok := p.String()
		ss = append(ss, s)
		return ok
	})
	return ss, ok
}

// plain marks the bytes a string holds as they are: ASCII, not a control
// character, quote or backslash.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// String reads a string. Its plain stretches are copied whole; escapes
// other than surrogates are decoded; a control character or invalid
// UTF-8 fails.
func (p *Scanner) String() (string, bool) {
	if !p.Token(`"`) {
		return "", false
	}
	var out []byte // nil until the first escape
	start := p.i
	for p.i < len(p.b) {
		i, b := p.i, p.b // the plain stretch in locals: a tight loop
		for i < len(b) && plain[b[i]] {
			i++
		}
		p.i = i
		if i == len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"':
			if out == nil {
				s := string(p.b[start:p.i])
				p.i++
				return s, true
			}
			out = append(out, p.b[start:p.i]...)
			p.i++
			return string(out), true
		case c == '\\':
			if out == nil {
				out = make([]byte, 0, len(p.b)-start)
			}
			out = append(out, p.b[start:p.i]...)
			var ok bool
			if out, ok = p.escape(out); !ok {
				return "", false
			}
			start = p.i
		case c < 0x20:
			return "", false
		default:
			r, size := utf8.DecodeRune(p.b[p.i:])
			if r == utf8.RuneError && size == 1 {
				return "", false
			}
			p.i += size
		}
	}
	return "", false
}

// escape decodes the escape at p.i (a backslash) onto out.
func (p *Scanner) escape(out []byte) ([]byte, bool) {
	if p.i+1 >= len(p.b) {
		return out, false
	}
	c := p.b[p.i+1]
	p.i += 2
	switch c {
	case '"', '\\', '/':
		return append(out, c), true
	case 'b':
		return append(out, '\b'), true
	case 'f':
		return append(out, '\f'), true
	case 'n':
		return append(out, '\n'), true
	case 'r':
		return append(out, '\r'), true
	case 't':
		return append(out, '\t'), true
	case 'u':
		if p.i+4 > len(p.b) {
			return out, false
		}
		var r rune
		for _, h := range p.b[p.i : p.i+4] {
			switch {
			case '0' <= h && h <= '9':
				h -= '0'
			case 'a' <= h && h <= 'f':
				h -= 'a' - 10
			case 'A' <= h && h <= 'F':
				h -= 'A' - 10
			default:
				return out, false
			}
			r = r<<4 | rune(h)
		}
		if 0xD800 <= r && r < 0xE000 { // a surrogate: encoding/json pairs them
			return out, false
		}
		p.i += 4
		return utf8.AppendRune(out, r), true
	}
	return out, false
}

// Number reads a number and returns its literal; plain says it is an
// integer written without fraction or exponent.
func (p *Scanner) Number() (lit []byte, plain bool, ok bool) {
	p.ws()
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.b) && p.b[p.i] == '0':
		p.i++
	case p.i < len(p.b) && '1' <= p.b[p.i] && p.b[p.i] <= '9':
		p.digits()
	default:
		return nil, false, false
	}
	plain = true
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if !p.digits() {
			return nil, false, false
		}
		plain = false
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if !p.digits() {
			return nil, false, false
		}
		plain = false
	}
	return p.b[start:p.i], plain, true
}

// digits reads one or more decimal digits.
func (p *Scanner) digits() bool {
	start := p.i
	for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
		p.i++
	}
	return p.i > start
}

// Int reads a plain integer that fits an int64.
func (p *Scanner) Int() (int64, bool) {
	lit, plain, ok := p.Number()
	if !ok || !plain {
		return 0, false
	}
	n, err := strconv.ParseInt(string(lit), 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// Raw reads any one value and returns its text.
func (p *Scanner) Raw() ([]byte, bool) {
	p.ws()
	start := p.i
	if !p.Skip() {
		return nil, false
	}
	return p.b[start:p.i], true
}

// Skip reads any one value.
func (p *Scanner) Skip() bool {
	switch p.Peek() {
	case '{':
		return p.Object(func(string) bool { return p.Skip() })
	case '[':
		return p.Array(p.Skip)
	case '"':
		_, ok := p.String()
		return ok
	case 't', 'f':
		var b bool
		return p.Bool(&b)
	case 'n':
		return p.Null()
	}
	_, _, ok := p.Number()
	return ok
}
