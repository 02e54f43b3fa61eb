package text

import (
	"strings"
	"testing"
)

// A path a server names with a newline in it cannot print a line of its
// own (issue 24 item 6: "main.go%0a/etc/passwd" printed a line that read
// /etc/passwd:1:1): it is quoted, and a plain path is left as it is.
func TestPathWithControlCharactersIsQuoted(t *testing.T) {
	for in, want := range map[string]string{
		"cmd/root.go":            "cmd/root.go",
		"dir with space/ü.go":    "dir with space/ü.go",
		"main.go\n/etc/passwd":   `"main.go\n/etc/passwd"`,
		"a\x1b[2Jb.go":           `"a\x1b[2Jb.go"`,
		"evil\u202egol.go":       `"evil\u202egol.go"`,
		"cr\rover.go":            `"cr\rover.go"`,
		"bad\xffutf8.go":         `"bad\xffutf8.go"`,
		"line\u2028separator.py": `"line\u2028separator.py"`,
		"tab\there.go":           `"tab\there.go"`,
	} {
		got := Path(in)
		if got != want {
			t.Errorf("Path(%q) = %s, want %s", in, got, want)
		}
		if strings.ContainsAny(got, "\n\r\x1b") {
			t.Errorf("Path(%q) = %q still holds a control character", in, got)
		}
	}
}

// One line of a server's text keeps its tabs and escapes the rest in
// place; a message of many lines keeps its newlines too, and loses only
// what could rewrite what is shown (a carriage return, an escape).
func TestLineAndMessageEscapeControlCharacters(t *testing.T) {
	if got, want := Line("fmt.Println\n/etc/passwd:1:1\tx"), `fmt.Println\n/etc/passwd:1:1`+"\tx"; got != want {
		t.Errorf("Line = %q, want %q", got, want)
	}
	if got, want := Line("plain"), "plain"; got != want {
		t.Errorf("Line(plain) = %q", got)
	}
	if got, want := Message("undefined: x\n\tsee \x1b[31mhere\x1b[0m\rhidden"), "undefined: x\n\tsee \\x1b[31mhere\\x1b[0m\\rhidden"; got != want {
		t.Errorf("Message = %q, want %q", got, want)
	}
	if got := Message("bad\xff"); got != `bad\xff` {
		t.Errorf("Message(invalid UTF-8) = %q", got)
	}
}
