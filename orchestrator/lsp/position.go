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
// start of the last identifier inside it ("auth.login" -> "login"): the
// cursor. An occurrence counts only where that identifier is whole in the
// line; one that ends or begins inside a longer identifier ("Store" in
// NewMemStore) is not taken silently. No whole occurrence, or several, is
// an error (*symbolError) that shows the line and proposes, for each
// candidate, a substring that resolves to it alone.
func symbolColumn(lineText string, line int, symbol string) (int, error) {
	if symbol == "" {
		return 0, fmt.Errorf("symbol is empty: pass a substring of line %d that names the symbol", line)
	}
	cursors, partial := occurrences(lineText, symbol)
	if len(cursors) == 1 {
		return cursors[0], nil
	}
	e := &symbolError{symbol: symbol, line: line, text: lineText, whole: len(cursors)}
	if len(cursors) == 0 {
		if len(partial) == 0 {
			return 0, fmt.Errorf("%q does not occur in line %d:\n  %d | %s\nPass a substring copied from that line, or the right line number", symbol, line, line, lineText)
		}
		cursors = partial
	}
	for _, c := range cursors {
		h, ok := hintFor(lineText, c)
		name := identAt(lineText, c)
		if name == "" { // a symbol without identifiers: its first character
			r, _ := utf8.DecodeRuneInString(lineText[c:])
			name = string(r)
		}
		e.candidates = append(e.candidates, candidate{col: c, ident: name, hint: h, ok: ok})
	}
	return 0, e
}

// occurrences finds symbol in lineText and returns the distinct cursors of
// its whole occurrences, and, only when there are none, the starts of the
// longer identifiers that its other occurrences fall inside.
func occurrences(lineText, symbol string) (whole, partial []int) {
	idStart, idEnd, hasIdent := lastIdentSpan(symbol)
	for i := 0; i+len(symbol) <= len(lineText); {
		j := strings.Index(lineText[i:], symbol)
		if j < 0 {
			break
		}
		a := i + j
		i = a + 1
		cursor := a + idStart
		cut := hasIdent && ((idStart == 0 && identBefore(lineText, a)) ||
			(idEnd == len(symbol) && identAfter(lineText, a+len(symbol))))
		if !cut {
			whole = appendNew(whole, cursor)
			continue
		}
		start := cursor
		for identBefore(lineText, start) {
			_, size := utf8.DecodeLastRuneInString(lineText[:start])
			start -= size
		}
		partial = appendNew(partial, start)
	}
	if len(whole) > 0 {
		partial = nil
	}
	return whole, partial
}

func appendNew(s []int, v int) []int {
	if len(s) > 0 && s[len(s)-1] == v {
		return s
	}
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

// identBefore says whether the rune before byte i of s is an identifier's.
func identBefore(s string, i int) bool {
	if i <= 0 {
		return false
	}
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	return isIdent(r)
}

// identAfter says whether the rune at byte i of s is an identifier's.
func identAfter(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return isIdent(r)
}

// identAt is the identifier that starts at byte i of s ("" when none).
func identAt(s string, i int) string {
	end := i
	for identAfter(s, end) {
		_, size := utf8.DecodeRuneInString(s[end:])
		end += size
	}
	return s[i:end]
}

// maxHintLen bounds a proposed hint, in bytes: past it the model is better
// served by the line number and a shorter excerpt elsewhere.
const maxHintLen = 48

// hintFor returns the shortest substring of lineText around cursor that,
// passed back as symbol, resolves to cursor alone; ok is false when none
// does (the cursor goes to a symbol's last identifier, so a place
// followed only by identifiers on the line may have no such substring).
// Every candidate is checked by resolving it, so a hint never leads
// elsewhere. It neither begins inside an identifier nor begins or ends
// with a space.
func hintFor(lineText string, cursor int) (string, bool) {
	if cursor >= len(lineText) {
		return "", false
	}
	end := cursor + len(identAt(lineText, cursor))
	if end == cursor { // not an identifier: at least its character
		_, size := utf8.DecodeRuneInString(lineText[cursor:])
		end += size
	}
	best := ""
	for lo := cursor; lo >= 0 && cursor-lo <= maxHintLen; lo-- {
		if !utf8.RuneStart(lineText[lo]) || isSpace(lineText[lo]) || (identBefore(lineText, lo) && identAfter(lineText, lo)) {
			continue
		}
		for hi := end; hi <= len(lineText) && hi-lo <= maxHintLen; hi++ {
			if best != "" && hi-lo >= len(best) {
				break
			}
			if hi < len(lineText) && !utf8.RuneStart(lineText[hi]) {
				continue
			}
			if isSpace(lineText[hi-1]) {
				continue
			}
			cand := lineText[lo:hi]
			if w, _ := occurrences(lineText, cand); len(w) == 1 && w[0] == cursor {
				best = cand
				break
			}
		}
	}
	return best, best != ""
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' }

// symbolError is a symbol that does not pick out one place in its line:
// several whole occurrences, or (whole == 0) occurrences only inside
// longer identifiers. Each candidate carries a hint that resolves to it.
type symbolError struct {
	symbol     string
	line       int
	text       string
	whole      int
	candidates []candidate
}

// candidate is one place the symbol may have meant: its cursor, the
// identifier there, and the substring that picks it out alone.
type candidate struct {
	col   int
	ident string
	hint  string
	ok    bool
}

// maxCandidates bounds the places an error lists.
const maxCandidates = 10

func (e *symbolError) Error() string {
	var b strings.Builder
	if e.whole > 1 {
		fmt.Fprintf(&b, "%q occurs %d times in line %d:\n  %d | %s\nPass a longer substring that occurs once; each of these picks out one occurrence:", e.symbol, e.whole, e.line, e.line, e.text)
	} else {
		var names []string
		for _, c := range e.candidates {
			names = append(names, c.ident)
		}
		inside := "a longer identifier"
		if len(names) > 1 {
			inside = "longer identifiers"
		}
		fmt.Fprintf(&b, "%q occurs in line %d only inside %s (%s), so it names none of them:\n  %d | %s\nPass the whole identifier; each of these picks out one:", e.symbol, e.line, inside, strings.Join(names, ", "), e.line, e.text)
	}
	for i, c := range e.candidates {
		if i == maxCandidates {
			fmt.Fprintf(&b, "\n  … and %d more", len(e.candidates)-i)
			break
		}
		col := utf8.RuneCountInString(e.text[:c.col]) + 1
		if c.ok {
			fmt.Fprintf(&b, "\n  column %d (%s): %q", col, c.ident, c.hint)
		} else {
			fmt.Fprintf(&b, "\n  column %d (%s): no substring of this line picks it out alone (the cursor goes to a symbol's last identifier); use ast_grep, or a line where it occurs once", col, c.ident)
		}
	}
	return b.String()
}

// lastIdentSpan returns the byte span in s of its last identifier; ok is
// false when s has none.
func lastIdentSpan(s string) (start, end int, ok bool) {
	end = -1
	for i := len(s); i > 0; {
		r, size := utf8.DecodeLastRuneInString(s[:i])
		if isIdent(r) {
			end = i
			break
		}
		i -= size
	}
	if end < 0 {
		return 0, 0, false
	}
	start = end
	for identBefore(s, start) {
		_, size := utf8.DecodeLastRuneInString(s[:start])
		start -= size
	}
	return start, end, true
}

func isIdent(r rune) bool { return r == '_' || r == '$' || unicode.IsLetter(r) || unicode.IsDigit(r) }

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
