package lsp

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"

	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// location is a place in a file as Berth shows it: the path relative to
// the workdir, a 1-based line and a 1-based column in characters, and the
// source line. A place outside the workdir is never shown (lines.path).
type location struct {
	path string
	line int
	col  int
	text string
}

func (l location) String() string {
	var b strings.Builder
	l.writeTo(&b)
	return b.String()
}

// writeTo writes the location as String does: a long list writes each
// straight into its answer.
func (l location) writeTo(b *strings.Builder) {
	b.WriteString(text.Path(l.path))
	b.WriteByte(':')
	b.WriteString(strconv.Itoa(l.line))
	b.WriteByte(':')
	b.WriteString(strconv.Itoa(l.col))
	text := text.Line(strings.TrimSpace(l.text))
	if text == "" {
		return
	}
	b.WriteString(": ")
	if len(text) > maxSourceLine { // else it has no more characters than bytes
		n := 0
		for i := range text {
			if n == maxSourceLine {
				b.WriteString(text[:i])
				b.WriteString("…")
				return
			}
			n++
		}
	}
	b.WriteString(text)
}

// maxSourceLine caps the source line shown with a location: enough to
// recognise the use, not a minified file's whole line.
const maxSourceLine = 160

// lines shows locations' source lines: from the text the server was sent
// for open files, else from the server's cache of files read from disk.
// A list names few files, one after another (servers group them, and a
// long list is sorted): each lookup first asks whether it is the file of
// the one before.
type lines struct {
	s     *server
	files map[string][]string
	// since, when set, is when the query began: a cached file checked on
	// disk after it (recheck, while the server worked) is not checked again.
	since time.Time

	// paths holds path's answers, and resolver what it looked at: a list
	// of locations names the same files and folders again and again.
	paths            map[uri.URI]resolved
	resolver         *workspace.Resolver
	lastAbs, lastRel string // rel's
	lastFile         string // line's
	lastLines        []string

	// outside holds the places the server named that resolve outside the
	// workdir, left out of the answer and counted in its note.
	outside map[spot]bool
}

// resolved is a URI's path, resolved, and whether it is inside the workdir.
type resolved struct {
	path   string
	inside bool
}

// newLines is a line reader for one query of s.
func newLines(s *server) *lines {
	return &lines{s: s, files: map[string][]string{}, paths: map[uri.URI]resolved{}}
}

// rel is a host path as locations show it, relative to the workdir.
func (r *lines) rel(abs string) string {
	if abs != r.lastAbs || r.lastRel == "" {
		// Quoted when a control character is in it (a server's URI
		// "main.go%0a/etc/passwd" must not print a line of its own).
		r.lastAbs, r.lastRel = abs, text.Path(r.s.paths.rel(abs))
	}
	return r.lastRel
}

// path is the file a URI from the server names, resolved (pathMap.locate),
// and whether it is inside the workdir. The answer is kept for this
// query only: a link may change between queries.
func (r *lines) path(u uri.URI) (string, bool) {
	a, ok := r.paths[u]
	if !ok {
		if r.resolver == nil {
			r.resolver = r.s.paths.ws().Resolver()
		}
		a.path, a.inside = r.s.paths.locate(u, r.resolver.Resolve)
		r.paths[u] = a
	}
	return a.path, a.inside
}

func (r *lines) line(abs string, n int) (string, bool) {
	ls := r.lastLines
	if abs != r.lastFile || r.lastFile == "" {
		var ok bool
		ls, ok = r.files[abs]
		if !ok {
			if text, open := r.s.docs.lines(abs); open {
				ls = text
			} else {
				ls = r.s.cache.fileLines(abs, r.since, r.s.paths.readFile)
			}
			r.files[abs] = ls
		}
		r.lastFile, r.lastLines = abs, ls
	}
	if n < 0 || n >= len(ls) {
		return "", false
	}
	return strings.TrimSuffix(ls[n], "\r"), true
}

// remember notes the files a long list read from disk, for the next
// recheck.
func (r *lines) remember() {
	r.s.cache.setRecent(r.fromDisk())
}

// fromDisk is the files r read from disk (not open documents), up to
// maxRecent.
func (r *lines) fromDisk() []string {
	recent := make([]string, 0, min(len(r.files), maxRecent))
	for abs := range r.files {
		if len(recent) == maxRecent {
			break
		}
		if !r.s.docs.has(abs) {
			recent = append(recent, abs)
		}
	}
	return recent
}

// at converts a server position in a file to a location; ok is false,
// and the place is counted in the note, when it is outside the workdir.
func (r *lines) at(u uri.URI, p protocol.Position) (l location, ok bool) {
	sp := r.spot(u, p)
	if sp.out {
		return location{}, false
	}
	return r.render(sp), true
}

// spot is a server position in a file, before it is rendered: a long
// list is sorted and cut first, so only the files of the shown locations
// are read. out marks a place outside the workdir (abs is then the path
// as the server named it), which listLocations leaves out.
type spot struct {
	abs string
	pos protocol.Position
	out bool
}

func (r *lines) spot(u uri.URI, p protocol.Position) spot {
	abs, inside := r.path(u)
	sp := spot{abs: abs, pos: p, out: !inside}
	if sp.out {
		if r.outside == nil {
			r.outside = map[spot]bool{}
		}
		r.outside[sp] = true
	}
	return sp
}

// outsideNote says how many places the answer left out because they
// are outside the workdir ("" for none).
func (r *lines) outsideNote() string {
	if len(r.outside) == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d result(s) outside the working directory not shown)", len(r.outside))
}

// render reads the source line of a spot and counts its column in
// characters.
func (r *lines) render(sp spot) location {
	l := location{path: r.rel(sp.abs), line: int(sp.pos.Line) + 1, col: int(sp.pos.Character) + 1}
	if text, ok := r.line(sp.abs, int(sp.pos.Line)); ok {
		l.text = text
		l.col = utf8.RuneCountInString(text[:r.s.enc.fromServer(text, sp.pos.Character)]) + 1
	}
	return l
}

// definitionSpots flattens a definition-like result.
func (r *lines) definitionSpots(res protocol.DefinitionResult) []spot {
	var out []spot
	switch v := res.(type) {
	case *protocol.Location:
		out = append(out, r.spot(v.URI, v.Range.Start))
	case protocol.LocationSlice:
		for _, l := range v {
			out = append(out, r.spot(l.URI, l.Range.Start))
		}
	case protocol.DefinitionLinkSlice:
		for _, l := range v {
			out = append(out, r.spot(l.TargetURI, l.TargetSelectionRange.Start))
		}
	}
	return out
}

// listLocations sorts spots, drops duplicates and the places outside the
// workdir (saying how many), caps them and renders the ones shown.
func (r *lines) listLocations(spots []spot, limit int, what string) string {
	spots = slices.DeleteFunc(spots, func(sp spot) bool { return sp.out })
	// Equal spots are alike: no need for a stable sort. Spots of one file
	// share its path string (lines.path), so most comparisons of paths
	// end at the pointer.
	slices.SortFunc(spots, func(a, b spot) int {
		if c := strings.Compare(a.abs, b.abs); c != 0 {
			return c
		}
		if a.pos.Line != b.pos.Line {
			return int(a.pos.Line) - int(b.pos.Line)
		}
		return int(a.pos.Character) - int(b.pos.Character)
	})
	spots = slices.Compact(spots)
	var b strings.Builder
	b.WriteString(countLine(what, len(spots), limit) + r.outsideNote() + "\n")
	spots = spots[:min(len(spots), limit)]
	b.Grow(len(spots) * 128) // a path, a position and a source line
	for _, sp := range spots {
		r.render(sp).writeTo(&b)
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n")
}

// withNote adds a note to the end of text's first line, where a model
// reads it before the list it qualifies ("" adds nothing).
func withNote(text, note string) string {
	if note == "" {
		return text
	}
	head, rest, cut := strings.Cut(text, "\n")
	head += " (" + note + ")"
	if cut {
		head += "\n" + rest
	}
	return head
}

// countLine heads a list: "what: n", or "what: showing limit of n" when
// the cap cuts it.
func countLine(what string, n, limit int) string {
	if n > limit {
		return fmt.Sprintf("%s: showing %d of %d", what, limit, n)
	}
	return fmt.Sprintf("%s: %d", what, n)
}

var symbolKinds = []string{"", "file", "module", "namespace", "package", "class", "method", "property", "field",
	"constructor", "enum", "interface", "function", "variable", "constant", "string", "number", "boolean",
	"array", "object", "key", "null", "enum member", "struct", "event", "operator", "type parameter"}

// kindName names an LSP symbol kind.
func kindName(k protocol.SymbolKind) string {
	if int(k) < len(symbolKinds) && k > 0 {
		return symbolKinds[k]
	}
	return fmt.Sprintf("kind %d", k)
}

// hoverText renders hover contents as plain text, escaping the server's
// control characters other than newlines and tabs.
func hoverText(c protocol.HoverContents) string { return text.Message(hoverRaw(c)) }

func hoverRaw(c protocol.HoverContents) string {
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
