package lsp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.lsp.dev/jsonrpc2"

	"go.lsp.dev/protocol"

	"github.com/berth-dev/berth/orchestrator"
)

// Caps from the spec.
const (
	maxReferences       = 50
	maxLocations        = 50
	maxWorkspaceSymbols = 100
	maxDocumentSymbols  = 200
	maxCodeActions      = 50
	maxFileDiagnostics  = 100
)

// cursor is a resolved position in a synced file.
type cursor struct {
	s    *server
	abs  string
	rel  string
	pos  protocol.Position
	line string // the source line
	end  protocol.Position
}

// at finds the file's server, syncs the file and resolves line + symbol.
func (p *Provider) at(ctx context.Context, run *orchestrator.Run, a args) (*cursor, *orchestrator.Result) {
	abs, bad := resolveFile(run, a.File)
	if bad != nil {
		return nil, bad
	}
	s, bad := p.serverFor(ctx, run, abs)
	if bad != nil {
		return nil, bad
	}
	if err := s.syncOpen(ctx); err != nil {
		return nil, orchestrator.Errorf("%s: %v", s.cfg.Name, err)
	}
	doc, err := s.sync(ctx, abs, false)
	if err != nil {
		return nil, orchestrator.Errorf("%s: %v", s.cfg.Name, err)
	}
	lt, _, err := lineAt(doc.text, a.Line)
	if err != nil {
		return nil, orchestrator.Errorf("%s: %v", a.File, err)
	}
	col, err := symbolColumn(lt, a.Line, a.Symbol)
	if err != nil {
		return nil, orchestrator.Errorf("%s: %v", a.File, err)
	}
	end := col
	for end < len(lt) {
		r := rune(lt[end])
		if r < 0x80 && !isIdent(r) {
			break
		}
		end++
	}
	line := uint32(a.Line - 1)
	return &cursor{s: s, abs: abs, rel: relTo(run.Workdir, abs), line: lt,
		pos: protocol.Position{Line: line, Character: s.enc.toServer(lt, col)},
		end: protocol.Position{Line: line, Character: s.enc.toServer(lt, end)}}, nil
}

func (c *cursor) params() protocol.TextDocumentPositionParams {
	return protocol.TextDocumentPositionParams{TextDocument: protocol.TextDocumentIdentifier{URI: c.s.toURI(c.abs)}, Position: c.pos}
}

// navigate runs the position actions.
func (p *Provider) navigate(ctx context.Context, run *orchestrator.Run, a args) *orchestrator.Result {
	c, bad := p.at(ctx, run, a)
	if bad != nil {
		return bad
	}
	s := c.s
	var supported bool
	switch a.Action {
	case "definition":
		supported = supports(s.caps.DefinitionProvider)
	case "type_definition":
		supported = supports(s.caps.TypeDefinitionProvider)
	case "implementation":
		supported = supports(s.caps.ImplementationProvider)
	case "references":
		supported = supports(s.caps.ReferencesProvider)
	case "hover":
		supported = supports(s.caps.HoverProvider)
	case "code_actions":
		supported = supports(s.caps.CodeActionProvider)
	}
	if !supported {
		return orchestrator.Errorf("%s does not support %s (it did not offer it at initialization); try another action, or ast_grep", s.cfg.Name, a.Action)
	}
	note := ""
	if a.Action == "references" || a.Action == "implementation" {
		if !s.waitLoaded(ctx) {
			note = fmt.Sprintf("\n(note: %s had not finished loading the workspace; the list may be incomplete)", s.cfg.Name)
		}
	}
	r := s.lineReader()
	what := fmt.Sprintf("%s of %q at %s:%d", strings.ReplaceAll(a.Action, "_", " "), a.Symbol, c.rel, a.Line)
	var text string
	err := p.retry(ctx, run, s, func(ctx context.Context) error {
		switch a.Action {
		case "definition":
			res, err := s.api.Definition(ctx, &protocol.DefinitionParams{TextDocumentPositionParams: c.params()})
			if err != nil {
				return err
			}
			text = r.listLocations(r.definitionSpots(res), maxLocations, what)
		case "type_definition":
			res, err := s.api.TypeDefinition(ctx, &protocol.TypeDefinitionParams{TextDocumentPositionParams: c.params()})
			if err != nil {
				return err
			}
			text = r.listLocations(r.definitionSpots(res), maxLocations, what)
		case "implementation":
			res, err := s.api.Implementation(ctx, &protocol.ImplementationParams{TextDocumentPositionParams: c.params()})
			if err != nil {
				return err
			}
			text = r.listLocations(r.definitionSpots(res), maxLocations, what)
		case "references":
			res, err := s.api.References(ctx, &protocol.ReferenceParams{TextDocumentPositionParams: c.params(),
				Context: protocol.ReferenceContext{IncludeDeclaration: true}})
			if err != nil {
				return err
			}
			spots := make([]spot, 0, len(res))
			for _, l := range res {
				spots = append(spots, r.spot(l.URI, l.Range.Start))
			}
			text = r.listLocations(spots, maxReferences, what)
		case "hover":
			res, err := s.api.Hover(ctx, &protocol.HoverParams{TextDocumentPositionParams: c.params()})
			if err != nil {
				return err
			}
			if res == nil || strings.TrimSpace(hoverText(res.Contents)) == "" {
				text = fmt.Sprintf("%s has no hover information for %q at %s:%d", s.cfg.Name, a.Symbol, c.rel, a.Line)
			} else {
				text = strings.TrimSpace(hoverText(res.Contents))
			}
		case "code_actions":
			res, err := s.api.CodeAction(ctx, &protocol.CodeActionParams{
				TextDocument: protocol.TextDocumentIdentifier{URI: s.toURI(c.abs)},
				Range:        protocol.Range{Start: c.pos, End: c.end},
				Context:      protocol.CodeActionContext{Diagnostics: onLine(s.latest(c.abs), c.pos.Line)},
			})
			if err != nil {
				return err
			}
			text = codeActionsText(res, what)
		}
		return nil
	})
	if err != nil {
		return orchestrator.Errorf("%s could not answer %s: %v", s.cfg.Name, a.Action, err)
	}
	return orchestrator.Text(text + note)
}

// retry runs f, and once more on a fresh server when the server died
// under it (the supervisor restarts it with backoff).
func (p *Provider) retry(ctx context.Context, run *orchestrator.Run, s *server, f func(ctx context.Context) error) error {
	err := s.call(ctx, f)
	var answered *jsonrpc2.Error
	if err == nil || ctx.Err() != nil || errors.As(err, &answered) {
		return err
	}
	// A transport error: the process may be dying; its exit lags the EOF.
	if !s.waitGone(time.Second) {
		return err
	}
	return errors.Join(err, fmt.Errorf("%s exited during the request; it is restarted on the next call: call again", s.cfg.Name))
}

func onLine(ds []protocol.Diagnostic, line uint32) []protocol.Diagnostic {
	out := []protocol.Diagnostic{}
	for _, d := range ds {
		if d.Range.Start.Line <= line && line <= d.Range.End.Line {
			out = append(out, d)
		}
	}
	return out
}

func codeActionsText(res []protocol.CommandOrCodeAction, what string) string {
	if len(res) == 0 {
		return what + ": the server offers none here"
	}
	var b strings.Builder
	n := len(res)
	if n > maxCodeActions {
		fmt.Fprintf(&b, "%s: showing %d of %d\n", what, maxCodeActions, n)
		res = res[:maxCodeActions]
	} else {
		fmt.Fprintf(&b, "%s: %d\n", what, n)
	}
	for _, a := range res {
		switch v := a.(type) {
		case *protocol.Command:
			fmt.Fprintf(&b, "- %s (command %s)\n", v.Title, v.Command)
		case *protocol.CodeAction:
			line := "- " + v.Title
			if v.Kind != nil && *v.Kind != "" {
				line += " [" + string(*v.Kind) + "]"
			}
			if v.IsPreferred != nil && *v.IsPreferred {
				line += " (preferred)"
			}
			if v.Edit != nil {
				files := len(v.Edit.Changes) + len(v.Edit.DocumentChanges)
				line += fmt.Sprintf(": edits %d file(s)", files)
			}
			b.WriteString(line + "\n")
		}
	}
	b.WriteString("Code actions are listed, not applied: make the change with your edit tools or lsp_rename.")
	return b.String()
}

// documentSymbols lists a file's symbols as a tree.
func (p *Provider) documentSymbols(ctx context.Context, run *orchestrator.Run, a args) *orchestrator.Result {
	abs, bad := resolveFile(run, a.File)
	if bad != nil {
		return bad
	}
	s, bad := p.serverFor(ctx, run, abs)
	if bad != nil {
		return bad
	}
	if !supports(s.caps.DocumentSymbolProvider) {
		return orchestrator.Errorf("%s does not support document symbols", s.cfg.Name)
	}
	if _, err := s.sync(ctx, abs, false); err != nil {
		return orchestrator.Errorf("%v", err)
	}
	var res protocol.DocumentSymbolResult
	err := p.retry(ctx, run, s, func(ctx context.Context) error {
		var err error
		res, err = s.api.DocumentSymbol(ctx, &protocol.DocumentSymbolParams{TextDocument: protocol.TextDocumentIdentifier{URI: s.toURI(abs)}})
		return err
	})
	if err != nil {
		return orchestrator.Errorf("%s could not list symbols: %v", s.cfg.Name, err)
	}
	var out []string
	total := 0
	var walk func(ds []protocol.DocumentSymbol, depth int)
	walk = func(ds []protocol.DocumentSymbol, depth int) {
		for _, d := range ds {
			total++
			if len(out) < maxDocumentSymbols {
				line := fmt.Sprintf("%s%s %s (line %d)", strings.Repeat("  ", depth), kindName(d.Kind), d.Name, d.SelectionRange.Start.Line+1)
				if d.Detail != nil && *d.Detail != "" {
					line += " " + *d.Detail
				}
				out = append(out, line)
			}
			walk(d.Children, depth+1)
		}
	}
	switch v := res.(type) {
	case protocol.DocumentSymbolSlice:
		walk(v, 0)
	case protocol.SymbolInformationSlice:
		for _, si := range v {
			total++
			if len(out) < maxDocumentSymbols {
				line := fmt.Sprintf("%s %s (line %d)", kindName(si.Kind), si.Name, si.Location.Range.Start.Line+1)
				if si.ContainerName != nil && *si.ContainerName != "" {
					line += " in " + *si.ContainerName
				}
				out = append(out, line)
			}
		}
	}
	head := fmt.Sprintf("symbols in %s: %d", relTo(run.Workdir, abs), total)
	if total > len(out) {
		head = fmt.Sprintf("symbols in %s: showing %d of %d", relTo(run.Workdir, abs), len(out), total)
	}
	return orchestrator.Text(strings.TrimRight(head+"\n"+strings.Join(out, "\n"), "\n"))
}

// workspaceSymbols searches the workspace of the file's server, or of
// every server whose root is the workdir itself.
func (p *Provider) workspaceSymbols(ctx context.Context, run *orchestrator.Run, a args) *orchestrator.Result {
	var servers []*server
	if a.File != "" {
		abs, bad := resolveFile(run, a.File)
		if bad != nil {
			return bad
		}
		s, bad := p.serverFor(ctx, run, abs)
		if bad != nil {
			return bad
		}
		servers = append(servers, s)
	} else {
		var why []string
		for _, sc := range p.conf.Servers {
			m := probe(ctx, run, sc, run.Workdir)
			if m.missing != "" || m.root != run.Workdir {
				continue
			}
			s, err := p.state(run).sv.get(ctx, m)
			if err != nil {
				why = append(why, err.Error())
				continue
			}
			servers = append(servers, s)
		}
		if len(servers) == 0 {
			msg := "no language server has its root at the workdir itself, so there is no workspace to search: pass \"file\" to search that file's project"
			if len(why) > 0 {
				msg += "\n" + strings.Join(why, "\n")
			}
			return orchestrator.Errorf("%s", msg)
		}
	}
	var locs []string
	var notes []string
	for _, s := range servers {
		if !supports(s.caps.WorkspaceSymbolProvider) {
			notes = append(notes, s.cfg.Name+" does not support workspace symbols")
			continue
		}
		if !s.waitLoaded(ctx) {
			notes = append(notes, s.cfg.Name+" had not finished loading the workspace; the list may be incomplete")
		}
		var res protocol.WorkspaceSymbolResult
		err := p.retry(ctx, run, s, func(ctx context.Context) error {
			var err error
			res, err = s.api.Symbols(ctx, &protocol.WorkspaceSymbolParams{Query: a.Query})
			return err
		})
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s could not search: %v", s.cfg.Name, err))
			continue
		}
		r := s.lineReader()
		add := func(name string, kind protocol.SymbolKind, container *string, l location) {
			entry := fmt.Sprintf("%s %s", kindName(kind), name)
			if container != nil && *container != "" {
				entry += " in " + *container
			}
			locs = append(locs, fmt.Sprintf("%s — %s:%d:%d", entry, l.path, l.line, l.col))
		}
		switch v := res.(type) {
		case protocol.SymbolInformationSlice:
			for _, si := range v {
				add(si.Name, si.Kind, si.ContainerName, r.at(si.Location.URI, si.Location.Range.Start))
			}
		case protocol.WorkspaceSymbolSlice:
			for _, ws := range v {
				var l location
				switch loc := ws.Location.(type) {
				case *protocol.Location:
					l = r.at(loc.URI, loc.Range.Start)
				case *protocol.LocationUriOnly:
					l = r.at(loc.URI, protocol.Position{})
				}
				add(ws.Name, ws.Kind, ws.ContainerName, l)
			}
		}
	}
	var b strings.Builder
	if len(locs) > maxWorkspaceSymbols {
		fmt.Fprintf(&b, "workspace symbols matching %q: showing %d of %d\n", a.Query, maxWorkspaceSymbols, len(locs))
		locs = locs[:maxWorkspaceSymbols]
	} else {
		fmt.Fprintf(&b, "workspace symbols matching %q: %d\n", a.Query, len(locs))
	}
	b.WriteString(strings.Join(locs, "\n"))
	for _, n := range notes {
		b.WriteString("\n(note: " + n + ")")
	}
	return orchestrator.Text(strings.TrimRight(b.String(), "\n"))
}

// fileDiagnostics reports the diagnostics of the file's current content.
func (p *Provider) fileDiagnostics(ctx context.Context, run *orchestrator.Run, a args) *orchestrator.Result {
	abs, bad := resolveFile(run, a.File)
	if bad != nil {
		return bad
	}
	s, bad := p.serverFor(ctx, run, abs)
	if bad != nil {
		return bad
	}
	doc, err := s.sync(ctx, abs, false)
	if err != nil {
		return orchestrator.Errorf("%v", err)
	}
	items, ok := s.diagnose(ctx, abs, doc)
	rel := relTo(run.Workdir, abs)
	if !ok {
		return orchestrator.Errorf("%s gave no diagnostics for %s within %s (it may still be loading): the state is unknown, not clean; call again, or run diagnostics \"*\"",
			s.cfg.Name, rel, s.conf.DiagnosticsTimeout.D())
	}
	ds := s.convert(abs, items, doc.text)
	if len(ds) == 0 {
		return orchestrator.Textf("%s: no diagnostics from %s", rel, s.cfg.Name)
	}
	_, text := capped(ds, maxFileDiagnostics, maxFileDiagnostics)
	return orchestrator.Textf("%s: %d diagnostic(s) from %s\n%s", rel, len(ds), s.cfg.Name, text)
}
