// Package markdown holds what Berth's documentation tooling needs to know
// of GitHub's Markdown: the id GitHub gives a heading, which links into a
// page name after '#'. The configuration reference's generator writes such
// links and the docs' link test checks them, with this one function.
package markdown

import (
	"strings"
	"unicode"
)

// Anchor is the id GitHub gives a heading of this text (its rendered
// text: code spans without their backticks): lower case, every character
// other than a letter, mark, number, '_', '-' or space dropped, spaces as
// '-'. A page's second heading of the same id gets "-1", the third "-2".
func Anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsNumber(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
