package vibe

import (
	"strings"
	"testing"
)

func TestCapture(t *testing.T) {
	const euro = "\u20ac" // three bytes
	for _, tc := range []struct {
		name     string
		tail     bool
		limit    int
		writes   []string
		want     string
		wantNote string
	}{
		{"under the limit", false, 10, []string{"abc", "def"}, "abcdef", ""},
		{"exactly the limit", false, 6, []string{"abc", "def"}, "abcdef", ""},
		{"head cut", false, 4, []string{"abc", "def"}, "abcd", "[cut: showing the first 4 of 6 bytes]"},
		{"head cut inside a character", false, 4, []string{"abc" + euro}, "abc", "[cut: showing the first 3 of 6 bytes]"},
		{"head cut after a character", false, 6, []string{"abc" + euro + "z"}, "abc" + euro, "[cut: showing the first 6 of 7 bytes]"},
		{"tail under the limit", true, 10, []string{"abc"}, "abc", ""},
		{"tail cut", true, 3, []string{"abc", "def", "gh"}, "fgh", "[cut: the first 5 of 8 bytes were dropped]"},
		{"tail cut inside a character", true, 4, []string{"ab" + euro + "z"}, euro + "z", "[cut: the first 2 of 6 bytes were dropped]"},
		{"tail cut mid character", true, 3, []string{"ab" + euro + "z"}, "z", "[cut: the first 5 of 6 bytes were dropped]"},
		{"tail many writes", true, 5, strings.Split(strings.Repeat("0123456789", 20), ""), "56789", "[cut: the first 195 of 200 bytes were dropped]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &capture{limit: tc.limit, tail: tc.tail}
			for _, w := range tc.writes {
				if n, err := c.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			got, note := c.text()
			if got != tc.want || note != tc.wantNote {
				t.Fatalf("got %q %q, want %q %q", got, note, tc.want, tc.wantNote)
			}
			if len(c.buf) > 2*tc.limit+len(tc.writes[len(tc.writes)-1]) {
				t.Fatalf("kept %d bytes for a limit of %d", len(c.buf), tc.limit)
			}
		})
	}
}
