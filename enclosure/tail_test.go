package enclosure

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTailKeepsTheNewestWholeCharacters(t *testing.T) {
	tl := NewTail(10)
	for _, s := range []string{"0123456789", "abc", "é"} {
		tl.Write([]byte(s))
	}
	s, dropped := tl.Snapshot()
	if s != "56789abcé" || dropped != 5 {
		t.Fatalf("kept %q, dropped %d; want \"56789abcé\", 5", s, dropped)
	}
	tl = NewTail(4)
	tl.Write([]byte("ééé")) // 6 bytes: the cut falls inside a character
	if s, _ := tl.Snapshot(); !utf8.ValidString(s) || s != "éé" {
		t.Fatalf("kept %q", s)
	}
}

func TestTailStaysBounded(t *testing.T) {
	tl := NewTail(100)
	line := []byte(strings.Repeat("x", 99) + "\n")
	for range 10000 {
		tl.Write(line)
	}
	s, dropped := tl.Snapshot()
	if len(s) != 100 || dropped != 10000*100-100 {
		t.Fatalf("kept %d bytes, dropped %d", len(s), dropped)
	}
	if cap(tl.buf) > 5*100 { // twice the limit plus one write, with append's growth
		t.Fatalf("buffer grew to %d bytes for a limit of 100", cap(tl.buf))
	}
}
