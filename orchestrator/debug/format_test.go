package debug

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCutValue(t *testing.T) {
	cases := []struct {
		name, in string
		keep     int // characters kept, -1 for unchanged
	}{
		{"short", "hello", -1},
		{"exactly 400", strings.Repeat("a", 400), -1},
		{"ascii over", strings.Repeat("a", 10000), 400},
		{"multibyte over", strings.Repeat("é", 401), 400},
		{"four-byte runes", strings.Repeat("😀", 500), 400},
	}
	for _, tc := range cases {
		got := cutValue(tc.in)
		if tc.keep < 0 {
			if got != tc.in {
				t.Errorf("%s: changed to %q", tc.name, got)
			}
			continue
		}
		if !utf8.ValidString(got) {
			t.Errorf("%s: cut inside a character", tc.name)
		}
		kept, _, _ := strings.Cut(got, "… (cut: ")
		if n := utf8.RuneCountInString(kept); n != tc.keep {
			t.Errorf("%s: kept %d characters, want %d", tc.name, n, tc.keep)
		}
		if !strings.Contains(got, "(cut: showing 400 of ") {
			t.Errorf("%s: the cut is not said: %q", tc.name, got[len(got)-60:])
		}
	}
}

func TestCappedKeepsTheNewest(t *testing.T) {
	c := newCapped(10)
	for _, s := range []string{"0123456789", "abc", "é"} {
		_, _ = c.Write([]byte(s))
	}
	if got := c.String(); got != "56789abcé" {
		t.Fatalf("kept %q", got)
	}
	if !utf8.ValidString(c.String()) {
		t.Fatalf("cut inside a character: %q", c.String())
	}
	if !strings.HasPrefix(c.report(), "(output capped at 10 bytes: the first ") {
		t.Fatalf("report does not say the cut: %q", c.report())
	}
}
