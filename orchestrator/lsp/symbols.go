package lsp

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"go.lsp.dev/protocol"

	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// symbols searches the workspace for the query, else lists the file's
// symbols.
func (p *Provider) symbols(ctx context.Context, run *orchestrator.Run, a args) (*orchestrator.Result, loss) {
	if a.Query != "" {
		return p.workspaceSymbols(ctx, run, a)
	}
	return p.documentSymbols(ctx, run, a)
}

// documentSymbols lists a file's symbols as a tree; lost says how its
// server was lost during the query.
func (p *Provider) documentSymbols(ctx context.Context, run *orchestrator.Run, a args) (*orchestrator.Result, loss) {
	abs, s, bad := p.fileServer(ctx, run, a.File)
	if bad != nil {
		return bad, kept
	}
	if !supports(s.caps.DocumentSymbolProvider) {
		return orchestrator.Errorf("%s does not support document symbols (it did not offer them at initialization); try ast_grep, or read the file", s.cfg.Name), kept
	}
	if _, err := s.syncFor(ctx, abs); err != nil {
		return orchestrator.Errorf("%s: %v", s.cfg.Name, err), lossOf(err)
	}
	var res protocol.DocumentSymbolResult
	err := s.proc.request(ctx, protocol.MethodTextDocumentDocumentSymbol, func(ctx context.Context) error {
		var err error
		res, err = s.proc.api.DocumentSymbol(ctx, &protocol.DocumentSymbolParams{TextDocument: protocol.TextDocumentIdentifier{URI: s.paths.toURI(abs)}})
		return err
	})
	if err != nil {
		return orchestrator.Errorf("%s could not list symbols: %s%s", s.cfg.Name, text.Indent(err.Error(), "  "), advice(err)), lossOf(err)
	}
	var out []string
	total := 0
	var walk func(ds []protocol.DocumentSymbol, depth int)
	walk = func(ds []protocol.DocumentSymbol, depth int) {
		for _, d := range ds {
			total++
			if len(out) < maxDocumentSymbols {
				line := fmt.Sprintf("%s%s %s (line %d)", strings.Repeat("  ", depth), kindName(d.Kind), text.Line(d.Name), d.SelectionRange.Start.Line+1)
				if d.Detail != nil && *d.Detail != "" {
					line += " " + text.Line(*d.Detail)
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
				line := fmt.Sprintf("%s %s (line %d)", kindName(si.Kind), text.Line(si.Name), si.Location.Range.Start.Line+1)
				if si.ContainerName != nil && *si.ContainerName != "" {
					line += " in " + text.Line(*si.ContainerName)
				}
				out = append(out, line)
			}
		}
	}
	head := countLine("symbols in "+text.Path(workspace.Rel(run.Workdir, abs)), total, maxDocumentSymbols)
	return orchestrator.Text(strings.TrimRight(head+"\n"+strings.Join(out, "\n"), "\n")), kept
}

// workspaceSymbols searches the workspace of the file's server, or of
// every server whose root is the workdir itself; lost says how one
// of them was lost during the search (a crash over a replacement).
func (p *Provider) workspaceSymbols(ctx context.Context, run *orchestrator.Run, a args) (res *orchestrator.Result, lost loss) {
	var servers []*server
	var asked []string // "gopls in .", when a search without a file asked more than the workdir's one server
	var notes []string
	if a.File != "" {
		_, s, bad := p.fileServer(ctx, run, a.File)
		if bad != nil {
			return bad, kept
		}
		servers = append(servers, s)
	} else {
		var why []string
		servers, asked, why = p.searchServers(ctx, run)
		if len(servers) == 0 {
			msg := "no language server can search the workdir: pass \"file\" to search that file's project"
			if len(why) > 0 {
				msg += "\n  " + strings.Join(why, "\n  ")
			}
			return orchestrator.Errorf("%s", msg), kept
		}
		notes = append(notes, why...)
	}
	var hits []symbolHit
	var first []string // notes that belong in the first line
	if len(asked) > 1 || len(asked) == 1 && !strings.HasSuffix(asked[0], " in .") || len(notes) > 0 {
		first = append(first, "asked "+strings.Join(asked, ", "))
	}
	for _, s := range servers {
		if !supports(s.caps.WorkspaceSymbolProvider) {
			notes = append(notes, s.cfg.Name+" does not support workspace symbols (pass file for that file's symbols, or use ast_grep)")
			continue
		}
		if n := s.loadNote(ctx, ""); n != "" {
			first = append(first, n)
		}
		var res protocol.WorkspaceSymbolResult
		err := s.proc.request(ctx, protocol.MethodWorkspaceSymbol, func(ctx context.Context) error {
			var err error
			res, err = s.proc.api.Symbols(ctx, &protocol.WorkspaceSymbolParams{Query: a.Query})
			return err
		})
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s could not search: %s", s.cfg.Name, text.Line(err.Error())))
			lost = max(lost, lossOf(err))
			continue
		}
		r := newLines(s)
		answered := 0
		add := func(name string, kind protocol.SymbolKind, container *string, sp spot) {
			answered++
			if sp.out {
				return // counted in r's note
			}
			entry := kindName(kind) + " " + text.Line(name)
			if container != nil && *container != "" {
				entry += " in " + text.Line(*container)
			}
			rel := r.rel(sp.abs)
			hits = append(hits, symbolHit{entry: entry, r: r, sp: sp, rank: symbolRank(name, a.Query, rel)})
		}
		switch v := res.(type) {
		case protocol.SymbolInformationSlice:
			for _, si := range v {
				add(si.Name, si.Kind, si.ContainerName, r.spot(si.Location.URI, si.Location.Range.Start))
			}
		case protocol.WorkspaceSymbolSlice:
			for _, ws := range v {
				switch loc := ws.Location.(type) {
				case *protocol.Location:
					add(ws.Name, ws.Kind, ws.ContainerName, r.spot(loc.URI, loc.Range.Start))
				case *protocol.LocationUriOnly:
					add(ws.Name, ws.Kind, ws.ContainerName, r.spot(loc.URI, protocol.Position{}))
				}
			}
		}
		if n := len(r.outside); n > 0 {
			first = append(first, fmt.Sprintf("%d match(es) of %s outside the working directory not shown", n, s.cfg.Name))
		}
		if limit := symbolLimits[filepath.Base(s.cfg.Command[0])]; limit > 0 && answered >= limit {
			first = append(first, fmt.Sprintf("%s answers at most %d, so more may match: narrow the query", s.cfg.Name, limit))
		}
	}
	// The workspace's own code first, the best matches first within it;
	// otherwise in the order the servers ranked them.
	slices.SortStableFunc(hits, func(a, b symbolHit) int { return a.rank - b.rank })
	var b strings.Builder
	b.WriteString(withNote(countLine(fmt.Sprintf("workspace symbols matching %q", a.Query), len(hits), maxWorkspaceSymbols), strings.Join(first, "; ")) + "\n")
	for _, h := range hits[:min(len(hits), maxWorkspaceSymbols)] {
		l := h.r.render(h.sp)
		fmt.Fprintf(&b, "%s — %s:%d:%d\n", h.entry, l.path, l.line, l.col)
	}
	for _, n := range notes {
		b.WriteString("(note: " + n + ")\n")
	}
	return orchestrator.Text(strings.TrimRight(b.String(), "\n")), lost
}

// maxSearchServers bounds the servers a workspace search without a file
// asks: each is started if it does not run yet.
const maxSearchServers = 6

// searchServers finds the servers a workspace search without a file
// asks: for each language, one server for each outermost root of its
// entries that holds files of that language (the first entry, in the
// catalog's order, whose executable is found: pyright before pylsp). A
// Go module at the workdir and a Python project in a folder are both
// searched. asked names each as "name in root"; why says which roots of
// a language with files were not asked, and why.
func (p *Provider) searchServers(ctx context.Context, run *orchestrator.Run) (servers []*server, asked, why []string) {
	var markers []string
	for _, sc := range p.conf.Servers {
		markers = append(markers, sc.RootMarkers...)
	}
	dirs := workspace.MarkerDirs(run.Workdir, markers, maxMarkerDirs)
	served := map[string]bool{}      // language and root
	missing := map[string][]string{} // why no entry could serve a language and root
	var order []string
	for _, sc := range p.conf.Servers {
		langs := strings.Join(sc.Languages, ",")
		for _, r := range outermost(rootsOf(sc, dirs)) {
			key := langs + " in " + r
			if served[key] {
				continue
			}
			abs := filepath.Join(run.Workdir, filepath.FromSlash(r))
			if !hasFile(abs, sc.Extensions) {
				continue // no file of its languages there: nothing to search
			}
			if _, ok := missing[key]; !ok {
				order = append(order, key)
			}
			if len(servers) == maxSearchServers {
				missing[key] = append(missing[key], fmt.Sprintf("%s: the search asks at most %d servers; pass a file of %s to search it", sc.Name, maxSearchServers, r))
				continue
			}
			m := probe(ctx, run, sc, abs, nil)
			if m.missing != "" {
				missing[key] = append(missing[key], fmt.Sprintf("%s: %s", sc.Name, m.missing))
				continue
			}
			s, err := p.state(run).sv.get(ctx, m)
			if err != nil {
				missing[key] = append(missing[key], err.Error())
				continue
			}
			served[key] = true
			servers = append(servers, s)
			asked = append(asked, sc.Name+" in "+r)
		}
	}
	for _, key := range order {
		if !served[key] {
			why = append(why, fmt.Sprintf("%s was not searched: %s", key, strings.Join(missing[key], "; ")))
		}
	}
	return servers, asked, why
}

// symbolHit is a workspace symbol inside the workdir, rendered only if
// it is shown.
type symbolHit struct {
	entry string // kind, name and container
	r     *lines
	sp    spot
	rank  int
}

// symbolRank orders workspace symbols: the workspace's own code before
// what it vendors or installs inside the workdir (node_modules, vendor,
// .venv: the folders a project search skips), then by how well the name
// matches the query: exactly, ignoring case, as a prefix, containing it,
// or only as the server's fuzzy match. Lower is first.
func symbolRank(name, query, rel string) int {
	rank := matchRank(name, query)
	if i := strings.LastIndexByte(name, '.'); i >= 0 { // English.Greet, pkg.Func
		rank = min(rank, matchRank(name[i+1:], query))
	}
	for _, part := range strings.Split(path.Dir(rel), "/") {
		if part != "." && workspace.SkipDir(part) {
			return rank + 10
		}
	}
	return rank
}

func matchRank(name, query string) int {
	ln, lq := strings.ToLower(name), strings.ToLower(query)
	switch {
	case name == query:
		return 0
	case ln == lq:
		return 1
	case strings.HasPrefix(ln, lq):
		return 2
	case strings.Contains(ln, lq):
		return 3
	}
	return 4
}

// symbolLimits names, by executable, the servers that answer at most so
// many workspace symbols (gopls's maxSymbols, clangd's --limit-results,
// rust-analyzer's workspace.symbol.search.limit): an answer that reaches
// the limit may leave matches out, and the first line says so.
var symbolLimits = map[string]int{"gopls": 100, "clangd": 100, "rust-analyzer": 128}
