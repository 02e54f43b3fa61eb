package text

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// What a server, an adapter or a program names (a path, a symbol, a
// message) is theirs, not Berth's: a control character in it could make
// an answer read as something Berth did not say ("main.go\n/etc/passwd"
// printed as a line that reads /etc/passwd:1:1) or drive a terminal (an
// escape sequence). These helpers show such text so that it cannot.

// unsafe says whether r may not be shown as it is: a control character
// (C0, DEL, C1), a line or paragraph separator, a bidirectional override
// or isolate (which reorders what a reader sees), or a byte that is not
// UTF-8.
func unsafe(r rune) bool {
	switch {
	case r == utf8.RuneError:
		return true
	case unicode.IsControl(r):
		return true
	case r == '\u2028' || r == '\u2029':
		return true
	case r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069', r == '\u200e' || r == '\u200f' || r == '\u061c':
		return true
	}
	return false
}

// clean says whether s has nothing unsafe in it (tabs aside when
// tabs is set, newlines aside when newlines is set).
func clean(s string, tabs, newlines bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			continue
		}
		// The slow path, from the first byte that is not plain ASCII.
		for _, r := range s[i:] {
			if (tabs && r == '\t') || (newlines && r == '\n') {
				continue
			}
			if unsafe(r) {
				return false
			}
		}
		return true
	}
	return true
}

// Path is a path someone else named, as an answer shows it: as it is
// when it holds nothing unsafe, else quoted as a Go string
// ("main.go\n/etc/passwd" becomes "\"main.go\\n/etc/passwd\""), so that
// it reads as one path and can be told apart from a plain one.
func Path(p string) string {
	if clean(p, false, false) {
		return p
	}
	return strconv.Quote(p)
}

// Line is one line of someone else's text (a symbol's name, a thread's,
// a one-line message): its unsafe characters, newlines included, are
// written as Go escapes (\n, \x1b, \u202e) in place. Tabs stay.
func Line(s string) string {
	if clean(s, true, false) {
		return s
	}
	return escape(s, true, false)
}

// Message is someone else's text of many lines (a diagnostic's message,
// a hover, a program's output): newlines and tabs stay, every other
// unsafe character (a carriage return, an escape sequence) is written as
// a Go escape.
func Message(s string) string {
	if clean(s, true, true) {
		return s
	}
	return escape(s, true, true)
}

func escape(s string, tabs, newlines bool) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case (tabs && r == '\t') || (newlines && r == '\n'):
			b.WriteRune(r)
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			b.WriteString(strconv.FormatUint(uint64(s[i])>>4, 16))
			b.WriteString(strconv.FormatUint(uint64(s[i])&0xf, 16))
		case unsafe(r):
			q := strconv.QuoteRuneToASCII(r) // 'x' with the escape inside
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// Indent is Message with every line after the first indented by indent:
// someone else's message of many lines shown after a prefix of Berth's
// ("main.go:3:1: error: ..."), whose lines cannot then read as entries of
// Berth's own list.
func Indent(s, indent string) string {
	s = Message(s)
	if !strings.Contains(s, "\n") {
		return s
	}
	return strings.ReplaceAll(s, "\n", "\n"+indent)
}
