package lsp

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// lineAt returns the 1-based line of text (without its line ending) and
// the byte offset where it starts.
func lineAt(text string, line int) (string, int, error) {
	n := strings.Count(text, "\n") + 1
	if strings.HasSuffix(text, "\n") {
		n--
	}
	if line < 1 || line > n {
		return "", 0, fmt.Errorf("line %d is outside the file, which has %d lines: pass a 1-based line number from 1 to %d", line, n, n)
	}
	start := 0
	for i := 1; i < line; i++ {
		start += strings.IndexByte(text[start:], '\n') + 1
	}
	end := strings.IndexByte(text[start:], '\n')
	if end < 0 {
		end = len(text) - start
	}
	return strings.TrimSuffix(text[start:start+end], "\r"), start, nil
}

// symbolColumn finds symbol in the line and returns the byte column of the
// start of the last identifier inside it ("auth.login" -> "login"). No
// occurrence, or several, is an error that shows the line.
func symbolColumn(lineText string, line int, symbol string) (int, error) {
	if symbol == "" {
		return 0, fmt.Errorf("symbol is empty: pass a substring of line %d that names the symbol", line)
	}
	var at []int
	for i := 0; i+len(symbol) <= len(lineText); {
		j := strings.Index(lineText[i:], symbol)
		if j < 0 {
			break
		}
		at = append(at, i+j)
		i += j + 1
	}
	switch len(at) {
	case 0:
		return 0, fmt.Errorf("%q does not occur in line %d:\n  %d | %s\nPass a substring copied from that line, or the right line number", symbol, line, line, lineText)
	case 1:
	default:
		var where []string
		for _, a := range at {
			where = append(where, fmt.Sprintf("column %d: …%s…", utf8.RuneCountInString(lineText[:a])+1, excerpt(lineText, a, len(symbol))))
		}
		return 0, fmt.Errorf("%q occurs %d times in line %d:\n  %d | %s\n  %s\nPass a longer substring that occurs once, such as one of the excerpts above", symbol, len(at), line, line, lineText, strings.Join(where, "\n  "))
	}
	return at[0] + lastIdentifier(symbol), nil
}

// lastIdentifier returns the byte offset in s of the start of its last
// identifier, or 0 when s has none.
func lastIdentifier(s string) int {
	end := -1
	for i := len(s); i > 0; {
		r, size := utf8.DecodeLastRuneInString(s[:i])
		if isIdent(r) {
			end = i
			break
		}
		i -= size
	}
	if end < 0 {
		return 0
	}
	start := end
	for start > 0 {
		r, size := utf8.DecodeLastRuneInString(s[:start])
		if !isIdent(r) {
			break
		}
		start -= size
	}
	return start
}

func isIdent(r rune) bool { return r == '_' || r == '$' || unicode.IsLetter(r) || unicode.IsDigit(r) }

// excerpt shows the match at a with a few characters either side.
func excerpt(line string, a, n int) string {
	lo, hi := a, a+n
	for k := 0; k < 8 && lo > 0; k++ {
		_, s := utf8.DecodeLastRuneInString(line[:lo])
		lo -= s
	}
	for k := 0; k < 8 && hi < len(line); k++ {
		_, s := utf8.DecodeRuneInString(line[hi:])
		hi += s
	}
	return line[lo:hi]
}

// encoding is the unit in which a server counts columns: UTF-8 code
// units (bytes), UTF-16 code units (the LSP default) or code points.
type encoding int

const (
	utf16Enc encoding = iota
	utf8Enc
	utf32Enc
)

func parseEncoding(s string) (encoding, bool) {
	switch s {
	case "utf-8":
		return utf8Enc, true
	case "utf-16":
		return utf16Enc, true
	case "utf-32":
		return utf32Enc, true
	}
	return utf16Enc, false
}

func (e encoding) String() string {
	switch e {
	case utf8Enc:
		return "utf-8"
	case utf32Enc:
		return "utf-32"
	}
	return "utf-16"
}

// units is how many of the encoding's units r takes.
func (e encoding) units(r rune) int {
	switch e {
	case utf8Enc:
		return utf8.RuneLen(r)
	case utf32Enc:
		return 1
	}
	return utf16.RuneLen(r)
}

// toServer converts a byte column in lineText to the server's unit.
func (e encoding) toServer(lineText string, byteCol int) uint32 {
	if byteCol > len(lineText) {
		byteCol = len(lineText)
	}
	if e == utf8Enc {
		return uint32(byteCol)
	}
	n := 0
	for _, r := range lineText[:byteCol] {
		n += e.units(r)
	}
	return uint32(n)
}

// fromServer converts a server column in lineText to a byte column.
func (e encoding) fromServer(lineText string, col uint32) int {
	if e == utf8Enc {
		return min(int(col), len(lineText))
	}
	units := 0
	for i, r := range lineText {
		if units >= int(col) {
			return i
		}
		units += e.units(r)
	}
	return len(lineText)
}
