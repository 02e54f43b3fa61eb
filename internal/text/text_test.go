package text

import "testing"

func TestCount(t *testing.T) {
	for _, tc := range []struct {
		n    int
		noun string
		want string
	}{
		{0, "file", "0 files"},
		{1, "file", "1 file"},
		{2, "replacement", "2 replacements"},
		{1, "child", "1 child"},
		{3, "child", "3 children"},
	} {
		if got := Count(tc.n, tc.noun); got != tc.want {
			t.Errorf("Count(%d, %q) = %q, want %q", tc.n, tc.noun, got, tc.want)
		}
	}
	if got := Plural(4, "line"); got != "lines" {
		t.Errorf("Plural(4, line) = %q", got)
	}
}
