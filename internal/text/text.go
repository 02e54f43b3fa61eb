// Package text holds the few English helpers the tools' answers share, so
// every tool words a count the same way.
package text

import "strconv"

// irregular are the plurals an added "s" gets wrong, among the nouns the
// answers count.
var irregular = map[string]string{"child": "children"}

// Plural is noun as it follows n: "frame" for 1, "frames" otherwise.
func Plural(n int, noun string) string {
	if n == 1 {
		return noun
	}
	if p, ok := irregular[noun]; ok {
		return p
	}
	return noun + "s"
}

// Count is n and its noun: "1 frame", "2 frames", "3 children".
func Count(n int, noun string) string { return strconv.Itoa(n) + " " + Plural(n, noun) }
