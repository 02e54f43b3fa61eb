package lsp

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"go.lsp.dev/protocol"

	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// diagnose returns the diagnostics of the synced version doc of abs:
// pulled where the server offers textDocument/diagnostic, else the first
// publish that follows the sync plus follow-ups within the debounce. ok is
// false when no answer for that version came in time, or the server died:
// silence is never taken as clean.
func (s *server) diagnose(ctx context.Context, abs string, doc document) (items []protocol.Diagnostic, ok bool) {
	if s.cfg.PullDiagnostics == pullTsserver {
		if items, err := s.tsserverDiagnostics(ctx, abs); err == nil {
			return items, true
		}
	}
	if s.caps.DiagnosticProvider != nil {
		var rep protocol.DocumentDiagnosticReport
		err := s.call(ctx, protocol.MethodTextDocumentDiagnostic, func(ctx context.Context) error {
			var err error
			rep, err = s.api.Diagnostic(ctx, &protocol.DocumentDiagnosticParams{TextDocument: protocol.TextDocumentIdentifier{URI: s.toURI(abs)}})
			return err
		})
		if full, isFull := rep.(*protocol.RelatedFullDocumentDiagnosticReport); err == nil && isFull {
			return full.Items, true
		}
	}
	return s.diags.wait(ctx, abs, doc.syncSeq, doc.version)
}

// pullTsserver names the pull through typescript-language-server's
// typescript.tsserverRequest command: it publishes only when a file's
// diagnostics change, so after a write that keeps a file clean it stays
// silent, and silence must not be taken as clean.
const pullTsserver = "tsserver"

// tsserverDiagnostics asks tsserver for a file's syntactic and semantic
// diagnostics, answered in order after the file's last change.
func (s *server) tsserverDiagnostics(ctx context.Context, abs string) ([]protocol.Diagnostic, error) {
	var out []protocol.Diagnostic
	for _, cmd := range []string{"syntacticDiagnosticsSync", "semanticDiagnosticsSync"} {
		arg, err := json.Marshal(map[string]any{"file": s.mapPath(abs)})
		if err != nil {
			return nil, err
		}
		name, _ := json.Marshal(cmd)
		var res protocol.LSPAny
		err = s.call(ctx, protocol.MethodWorkspaceExecuteCommand, func(ctx context.Context) error {
			var err error
			res, err = s.api.ExecuteCommand(ctx, &protocol.ExecuteCommandParams{Command: "typescript.tsserverRequest", Arguments: []protocol.LSPAny{name, arg}})
			return err
		})
		if err != nil {
			return nil, err
		}
		var body struct {
			Body []struct {
				Start, End struct{ Line, Offset uint32 }
				Text       string
				Code       int32
				Category   string
			} `json:"body"`
		}
		if err := json.Unmarshal(res, &body); err != nil {
			return nil, fmt.Errorf("tsserver's %s answer: %w", cmd, err)
		}
		for _, d := range body.Body {
			sev := protocol.DiagnosticSeverityError
			switch d.Category {
			case "warning":
				sev = protocol.DiagnosticSeverityWarning
			case "suggestion":
				sev = protocol.DiagnosticSeverityHint
			case "message":
				sev = protocol.DiagnosticSeverityInformation
			}
			out = append(out, protocol.Diagnostic{
				Range: protocol.Range{Start: protocol.Position{Line: d.Start.Line - 1, Character: d.Start.Offset - 1},
					End: protocol.Position{Line: d.End.Line - 1, Character: d.End.Offset - 1}},
				Severity: sev, Code: protocol.Integer(d.Code), Source: protocol.NewOptional("typescript"),
				Message: protocol.String(d.Text),
			})
		}
	}
	return out, nil
}

// pulls says whether diagnose asks for diagnostics rather than waiting
// for a publish.
func (s *server) pulls() bool {
	return s.caps.DiagnosticProvider != nil || s.cfg.PullDiagnostics == pullTsserver
}

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

// convert turns a server's diagnostics for abs into diags, with columns
// counted in characters of the file's text.
func (s *server) convert(abs string, items []protocol.Diagnostic, text string) []diag {
	out := make([]diag, 0, len(items))
	for _, it := range items {
		line := int(it.Range.Start.Line) + 1
		col := 1
		if lt, _, err := lineAt(text, line); err == nil {
			col = utf8.RuneCountInString(lt[:s.enc.fromServer(lt, it.Range.Start.Character)]) + 1
		}
		d := diag{rel: workspace.Rel(s.workdir, abs), line: line, col: col, severity: it.Severity, message: messageText(it.Message)}
		if d.severity == 0 {
			d.severity = protocol.DiagnosticSeverityError
		}
		if it.Code != nil {
			d.code = fmt.Sprint(it.Code)
		}
		if src, ok := it.Source.Get(); ok {
			d.source = src
		}
		out = append(out, d)
	}
	sortDiags(out)
	return out
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
