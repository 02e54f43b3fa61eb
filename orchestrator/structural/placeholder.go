package structural

import (
	"fmt"
	"strings"
)

// metaVar is a pattern variable: $NAME (one node), $$$NAME (a run of
// siblings); a name starting with "_" ($_, $$$) binds nothing.
type metaVar struct {
	name  string // without the $ signs; "" for $$$ alone
	multi bool
}

func (v metaVar) anonymous() bool { return v.name == "" || strings.HasPrefix(v.name, "_") }

func (v metaVar) String() string {
	if v.multi {
		return "$$$" + v.name
	}
	return "$" + v.name
}

// placeholderPrefix starts every identifier the pattern variables are
// rewritten into. It is a plain identifier in every grammar, so the
// snippet parses as ordinary code.
const placeholderPrefix = "b3rth_"

// isNameStart and isNameChar follow the variable syntax [A-Z_][A-Z0-9_]*.
func isNameStart(c byte) bool { return c == '_' || (c >= 'A' && c <= 'Z') }
func isNameChar(c byte) bool  { return isNameStart(c) || (c >= '0' && c <= '9') }

// rewritePlaceholders replaces the pattern variables in src with
// identifiers legal in the language, and returns the map from identifier
// (without the sigil) back to the variable.
func rewritePlaceholders(src, sigil string) (string, map[string]metaVar) {
	vars := map[string]metaVar{}
	var b strings.Builder
	anon := 0
	for i := 0; i < len(src); {
		if src[i] != '$' {
			b.WriteByte(src[i])
			i++
			continue
		}
		v, k, ok := scanVar(src, i)
		if !ok {
			b.WriteByte(src[i])
			i++
			continue
		}
		var id string
		if v.anonymous() {
			id = fmt.Sprintf("%sa%d", placeholderPrefix, anon)
			anon++
		} else if v.multi {
			id = placeholderPrefix + "m_" + v.name
		} else {
			id = placeholderPrefix + "v_" + v.name
		}
		vars[id] = v
		b.WriteString(sigil)
		b.WriteString(id)
		i = k
	}
	return b.String(), vars
}

// scanVar reads the variable that starts at src[i], a "$": $NAME,
// $$$NAME, or $$$ alone; end is the offset after it. ok is false when the
// "$" starts none ("$" alone, "$x", "$$$1"): then it is plain text.
func scanVar(src string, i int) (v metaVar, end int, ok bool) {
	multi := strings.HasPrefix(src[i:], "$$$")
	j := i + 1
	if multi {
		j = i + 3
	}
	k := j
	for k < len(src) && isNameChar(src[k]) {
		k++
	}
	name := src[j:k]
	if (name == "" && !multi) || (name != "" && !isNameStart(name[0])) {
		return metaVar{}, i, false
	}
	return metaVar{name: name, multi: multi}, k, true
}
