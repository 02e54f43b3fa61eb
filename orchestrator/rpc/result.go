package rpc

import (
	"strconv"
	"unicode/utf8"

	"github.com/berth-dev/berth/internal/jsonscan"
	"github.com/berth-dev/berth/orchestrator"
)

// A tool's result is the protocol's commonest payload and often its
// largest (kilobytes of text). appendResult writes it and readResult
// reads it without reflection: encoding/json's Marshal and Unmarshal took
// about a third of what the protocol adds to a tools/call with a 7 KB
// answer, most of it in code that is cold after a tool's wait.

// appendResult appends r as json.Marshal writes it, byte for byte.
func appendResult(b []byte, r *orchestrator.Result) []byte {
	if r == nil {
		return append(b, "null"...)
	}
	b = append(b, `{"content":`...)
	if r.Content == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Content {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendBlock(b, &r.Content[i])
		}
		b = append(b, ']')
	}
	b = append(b, `,"isError":`...)
	b = strconv.AppendBool(b, r.IsError)
	return append(b, '}')
}

// resultSize is about the length of r encoded, to size a buffer once.
func resultSize(r *orchestrator.Result) int {
	n := 32
	if r == nil {
		return n
	}
	for _, bl := range r.Content {
		n += 64 + len(bl.Type) + len(bl.Text) + len(bl.Data) + len(bl.MimeType)
		n += len(bl.Text) / 16 // room for escapes (tabs and newlines of source text)
		for _, c := range bl.Columns {
			n += len(c) + 3
		}
		for _, row := range bl.Rows {
			for _, c := range row {
				n += len(c) + 3
			}
		}
	}
	return n
}

// appendBlock writes the fields of orchestrator.Block in their order,
// each omitted when empty as its omitempty tag says. TestBlockFields
// fails when Block gains a field this (or readBlock) does not know.
func appendBlock(b []byte, bl *orchestrator.Block) []byte {
	b = append(b, `{"type":`...)
	b = appendString(b, bl.Type)
	if bl.Text != "" {
		b = append(b, `,"text":`...)
		b = appendString(b, bl.Text)
	}
	if bl.Data != "" {
		b = append(b, `,"data":`...)
		b = appendString(b, bl.Data)
	}
	if bl.MimeType != "" {
		b = append(b, `,"mimeType":`...)
		b = appendString(b, bl.MimeType)
	}
	if len(bl.Columns) > 0 {
		b = append(b, `,"columns":`...)
		b = appendStrings(b, bl.Columns)
	}
	if len(bl.Rows) > 0 {
		b = append(b, `,"rows":[`...)
		for i, row := range bl.Rows {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendStrings(b, row)
		}
		b = append(b, ']')
	}
	if bl.Truncated {
		b = append(b, `,"truncated":true`...)
	}
	return append(b, '}')
}

func appendStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// plain marks the ASCII bytes a JSON string holds as they are, as
// encoding/json writes them: not a control character, quote, backslash,
// or one of <, > and & (escaped for HTML).
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// appendString quotes s as encoding/json does: short escapes for \b \f
// \n \r \t, \u00XX for other control characters and <, > and &, U+FFFD
// for invalid UTF-8, and \u2028 and \u2029 escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		for i < len(s) && plain[s[i]] {
			i++
		}
		if i == len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// readResult reads a result in the shape appendResult writes, with any
// whitespace between tokens. Anything else (another member, a key in
// another case, a repeated key, null where a string or a bool goes, a
// surrogate escape, invalid UTF-8 or JSON) says !ok, and the caller reads
// it with encoding/json, which then decides: so a result read here is the
// one json.Unmarshal would make.
func readResult(data []byte) (r orchestrator.Result, ok bool) {
	p := jsonscan.New(data)
	ok = p.Object(func(key string) bool {
		switch key {
		case "content":
			if p.Null() {
				r.Content = nil
				return true
			}
			r.Content = []orchestrator.Block{}
			return p.Array(func() bool {
				var bl orchestrator.Block
				if !readBlock(p, &bl) {
					return false
				}
				r.Content = append(r.Content, bl)
				return true
			})
		case "isError":
			return p.Bool(&r.IsError)
		}
		return false
	})
	return r, ok && p.End()
}

// readBlock reads the fields appendBlock writes.
func readBlock(p *jsonscan.Scanner, bl *orchestrator.Block) bool {
	return p.Object(func(key string) bool {
		var ok bool
		switch key {
		case "type":
			bl.Type, ok = p.String()
		case "text":
			bl.Text, ok = p.String()
		case "data":
			bl.Data, ok = p.String()
		case "mimeType":
			bl.MimeType, ok = p.String()
		case "columns":
			bl.Columns, ok = p.Strings()
		case "rows":
			if p.Null() {
				bl.Rows = nil
				return true
			}
			bl.Rows = [][]string{}
			ok = p.Array(func() bool {
				row, ok := p.Strings()
				bl.Rows = append(bl.Rows, row)
				return ok
			})
		case "truncated":
			ok = p.Bool(&bl.Truncated)
		}
		return ok
	})
}
