package lsp

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"unicode/utf8"

	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"
)

// location is a place in a file as Berth shows it: the path relative to
// the workdir (absolute outside it), a 1-based line and a 1-based column
// in characters, and the source line.
type location struct {
	path string
	line int
	col  int
	text string
}

func (l location) String() string {
	if l.text == "" {
		return fmt.Sprintf("%s:%d:%d", l.path, l.line, l.col)
	}
	return fmt.Sprintf("%s:%d:%d: %s", l.path, l.line, l.col, strings.TrimSpace(l.text))
}

// lines reads files once per call to show locations' source lines.
type lines struct {
	s     *server
	files map[string][]string
}

func (s *server) lineReader() *lines { return &lines{s: s, files: map[string][]string{}} }

func (r *lines) line(abs string, n int) (string, bool) {
	ls, ok := r.files[abs]
	if !ok {
		text, open := r.s.text(abs)
		if !open {
			b, err := os.ReadFile(abs)
			if err == nil {
				text = string(b)
			}
		}
		ls = strings.Split(text, "\n")
		r.files[abs] = ls
	}
	if n < 0 || n >= len(ls) {
		return "", false
	}
	return strings.TrimSuffix(ls[n], "\r"), true
}

// at converts a server position in a file to a location.
func (r *lines) at(u uri.URI, p protocol.Position) location {
	abs := r.s.fromURI(u)
	l := location{path: relTo(r.s.workdir, abs), line: int(p.Line) + 1, col: int(p.Character) + 1}
	if text, ok := r.line(abs, int(p.Line)); ok {
		l.text = text
		l.col = utf8.RuneCountInString(text[:r.s.enc.fromServer(text, p.Character)]) + 1
	}
	return l
}

// definitionLocations flattens a definition-like result.
func (r *lines) definitionLocations(res protocol.DefinitionResult) []location {
	var out []location
	switch v := res.(type) {
	case *protocol.Location:
		out = append(out, r.at(v.URI, v.Range.Start))
	case protocol.LocationSlice:
		for _, l := range v {
			out = append(out, r.at(l.URI, l.Range.Start))
		}
	case protocol.DefinitionLinkSlice:
		for _, l := range v {
			out = append(out, r.at(l.TargetURI, l.TargetSelectionRange.Start))
		}
	}
	return out
}

// listLocations sorts locations, drops duplicates and caps them.
func listLocations(locs []location, limit int, what string) string {
	sort.SliceStable(locs, func(i, j int) bool {
		if locs[i].path != locs[j].path {
			return locs[i].path < locs[j].path
		}
		if locs[i].line != locs[j].line {
			return locs[i].line < locs[j].line
		}
		return locs[i].col < locs[j].col
	})
	var uniq []location
	for i, l := range locs {
		if i > 0 && l.path == locs[i-1].path && l.line == locs[i-1].line && l.col == locs[i-1].col {
			continue
		}
		uniq = append(uniq, l)
	}
	var b strings.Builder
	n := len(uniq)
	if n > limit {
		fmt.Fprintf(&b, "%s: showing %d of %d\n", what, limit, n)
		uniq = uniq[:limit]
	} else {
		fmt.Fprintf(&b, "%s: %d\n", what, n)
	}
	for _, l := range uniq {
		b.WriteString(l.String())
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n")
}

var symbolKinds = []string{"", "file", "module", "namespace", "package", "class", "method", "property", "field",
	"constructor", "enum", "interface", "function", "variable", "constant", "string", "number", "boolean",
	"array", "object", "key", "null", "enum member", "struct", "event", "operator", "type parameter"}

func kindName(k protocol.SymbolKind) string {
	if int(k) < len(symbolKinds) && k > 0 {
		return symbolKinds[k]
	}
	return fmt.Sprintf("kind %d", k)
}

// hoverText renders hover contents as plain text.
func hoverText(c protocol.HoverContents) string {
	switch v := c.(type) {
	case *protocol.MarkupContent:
		return v.Value
	case protocol.String:
		return string(v)
	case *protocol.MarkedStringWithLanguage:
		return "```" + v.Language + "\n" + v.Value + "\n```"
	case protocol.MarkedStringSlice:
		var parts []string
		for _, m := range v {
			switch x := m.(type) {
			case protocol.String:
				parts = append(parts, string(x))
			case *protocol.MarkedStringWithLanguage:
				parts = append(parts, "```"+x.Language+"\n"+x.Value+"\n```")
			}
		}
		return strings.Join(parts, "\n\n")
	}
	return ""
}

// supports says whether a capability union is present and not false.
func supports(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case protocol.Boolean:
		return bool(x)
	}
	return true
}
