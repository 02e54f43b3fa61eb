package lsp

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.lsp.dev/protocol"

	"github.com/berth-dev/berth/orchestrator"
)

// documentSymbols lists a file's symbols as a tree; crashed says the
// server exited during the query.
func (p *Provider) documentSymbols(ctx context.Context, run *orchestrator.Run, a args) (*orchestrator.Result, bool) {
	abs, s, bad := p.fileServer(ctx, run, a.File)
	if bad != nil {
		return bad, false
	}
	if !supports(s.caps.DocumentSymbolProvider) {
		return orchestrator.Errorf("%s does not support document symbols (it did not offer them at initialization); try ast_grep, or read the file", s.cfg.Name), false
	}
	if _, err := s.syncFor(ctx, abs); err != nil {
		return orchestrator.Errorf("%s: %v", s.cfg.Name, err), errors.Is(err, errExited)
	}
	var res protocol.DocumentSymbolResult
	err := s.request(ctx, protocol.MethodTextDocumentDocumentSymbol, func(ctx context.Context) error {
		var err error
		res, err = s.api.DocumentSymbol(ctx, &protocol.DocumentSymbolParams{TextDocument: protocol.TextDocumentIdentifier{URI: s.toURI(abs)}})
		return err
	})
	if err != nil {
		return orchestrator.Errorf("%s could not list symbols: %v%s", s.cfg.Name, err, advice(err)), errors.Is(err, errExited)
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
	head := countLine("symbols in "+relTo(run.Workdir, abs), total, maxDocumentSymbols)
	return orchestrator.Text(strings.TrimRight(head+"\n"+strings.Join(out, "\n"), "\n")), false
}

// workspaceSymbols searches the workspace of the file's server, or of
// every server whose root is the workdir itself; crashed says one of them
// exited during the search.
func (p *Provider) workspaceSymbols(ctx context.Context, run *orchestrator.Run, a args) (res *orchestrator.Result, crashed bool) {
	var servers []*server
	if a.File != "" {
		_, s, bad := p.fileServer(ctx, run, a.File)
		if bad != nil {
			return bad, false
		}
		servers = append(servers, s)
	} else {
		var why []string
		served := map[string]bool{} // one server per language: pyright, not pylsp too
		for _, sc := range p.conf.Servers {
			langs := strings.Join(sc.Languages, ",")
			if served[langs] {
				continue
			}
			m := probe(ctx, run, sc, run.Workdir, nil)
			if m.missing != "" || m.root != run.Workdir {
				continue
			}
			served[langs] = true
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
			return orchestrator.Errorf("%s", msg), false
		}
	}
	var locs []string
	var notes []string
	var first []string // notes that belong in the first line
	for _, s := range servers {
		if !supports(s.caps.WorkspaceSymbolProvider) {
			notes = append(notes, s.cfg.Name+" does not support workspace symbols (pass file for that file's symbols, or use ast_grep)")
			continue
		}
		if n := s.loadNote(ctx, ""); n != "" {
			first = append(first, n)
		}
		var res protocol.WorkspaceSymbolResult
		err := s.request(ctx, protocol.MethodWorkspaceSymbol, func(ctx context.Context) error {
			var err error
			res, err = s.api.Symbols(ctx, &protocol.WorkspaceSymbolParams{Query: a.Query})
			return err
		})
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s could not search: %v", s.cfg.Name, err))
			crashed = crashed || errors.Is(err, errExited)
			continue
		}
		r := s.lineReader()
		add := func(name string, kind protocol.SymbolKind, container *string, l location, inside bool) {
			if !inside {
				return // counted in r's note
			}
			entry := fmt.Sprintf("%s %s", kindName(kind), name)
			if container != nil && *container != "" {
				entry += " in " + *container
			}
			locs = append(locs, fmt.Sprintf("%s — %s:%d:%d", entry, l.path, l.line, l.col))
		}
		switch v := res.(type) {
		case protocol.SymbolInformationSlice:
			for _, si := range v {
				l, inside := r.at(si.Location.URI, si.Location.Range.Start)
				add(si.Name, si.Kind, si.ContainerName, l, inside)
			}
		case protocol.WorkspaceSymbolSlice:
			for _, ws := range v {
				var l location
				inside := false
				switch loc := ws.Location.(type) {
				case *protocol.Location:
					l, inside = r.at(loc.URI, loc.Range.Start)
				case *protocol.LocationUriOnly:
					l, inside = r.at(loc.URI, protocol.Position{})
				}
				add(ws.Name, ws.Kind, ws.ContainerName, l, inside)
			}
		}
		if n := len(r.outside); n > 0 {
			first = append(first, fmt.Sprintf("%d match(es) of %s outside the working directory not shown", n, s.cfg.Name))
		}
	}
	var b strings.Builder
	b.WriteString(withNote(countLine(fmt.Sprintf("workspace symbols matching %q", a.Query), len(locs), maxWorkspaceSymbols), strings.Join(first, "; ")) + "\n")
	locs = locs[:min(len(locs), maxWorkspaceSymbols)]
	b.WriteString(strings.Join(locs, "\n"))
	for _, n := range notes {
		b.WriteString("\n(note: " + n + ")")
	}
	return orchestrator.Text(strings.TrimRight(b.String(), "\n")), crashed
}
