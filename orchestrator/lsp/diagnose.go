package lsp

import (
	"fmt"
	"sort"
	"strings"

	"go.lsp.dev/protocol"

	"github.com/berth-dev/berth/internal/text"
)

// diag is a diagnostic as Berth reports it.
type diag struct {
	rel      string
	line     int // 1-based
	col      int // 1-based, in characters
	severity protocol.DiagnosticSeverity
	code     string
	source   string
	message  string
}

func (d diag) key() diagKey {
	return diagKey{severity: severityName(d.severity), code: d.code, message: d.message}
}

func (d diag) String() string {
	// The server's message keeps its lines, each after the first
	// indented, so that none reads as a diagnostic of its own; the path
	// is quoted when a control character is in it.
	s := fmt.Sprintf("%s:%d:%d: %s: %s", text.Path(d.rel), d.line, d.col, severityName(d.severity), text.Indent(d.message, "    "))
	if d.code != "" {
		s += " [" + text.Line(d.code) + "]"
	}
	return s
}

// messageText is a diagnostic's message, plain or markup.
func messageText(m protocol.InlayHintTooltip) string {
	switch v := m.(type) {
	case protocol.String:
		return strings.TrimSpace(string(v))
	case *protocol.MarkupContent:
		return strings.TrimSpace(v.Value)
	}
	return ""
}

// sortDiags orders errors before warnings before the rest, then by path
// and position.
func sortDiags(ds []diag) {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i], ds[j]
		if a.severity != b.severity {
			return a.severity < b.severity
		}
		if a.rel != b.rel {
			return a.rel < b.rel
		}
		if a.line != b.line {
			return a.line < b.line
		}
		return a.col < b.col
	})
}

// severityName names a severity; a server that gives none means an
// error (LSP leaves it to the client).
func severityName(s protocol.DiagnosticSeverity) string {
	switch s {
	case protocol.DiagnosticSeverityWarning:
		return "warning"
	case protocol.DiagnosticSeverityInformation:
		return "information"
	case protocol.DiagnosticSeverityHint:
		return "hint"
	}
	return "error"
}

// capped formats diagnostics errors first, at most perFile per file and
// total in all, saying how many were left out.
func capped(ds []diag, perFile, total int) (shown []diag, text string) {
	sortDiags(ds)
	count := map[string]int{}
	var lines []string
	for _, d := range ds {
		if len(shown) >= total || count[d.rel] >= perFile {
			continue
		}
		count[d.rel]++
		shown = append(shown, d)
		lines = append(lines, d.String())
	}
	if n := len(ds) - len(shown); n > 0 {
		lines = append(lines, fmt.Sprintf("… and %d more", n))
	}
	return shown, strings.Join(lines, "\n")
}
