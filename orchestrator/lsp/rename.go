package lsp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"

	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// renameTool is lsp_rename: a project-wide rename, written all or nothing.
type renameTool struct{ p *Provider }

type renameArgs struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Symbol  string `json:"symbol"`
	NewName string `json:"new_name"`
}

// renameSpec is built once: the registry asks for it on every call.
var renameSpec = orchestrator.Spec{
	Name: "lsp_rename",
	Tier: orchestrator.Write,
	Description: `Rename a symbol everywhere in its project through the language server, writing every file or none.
Pass file, a 1-based line, symbol (a substring of that line naming the symbol once; the last identifier in it is renamed) and new_name.
Returns each changed file with its number of edits, plus any problems the rename introduced.`,
	InputSchema: schema(map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []string{"file", "line", "symbol", "new_name"},
		"properties": map[string]any{
			"file":     map[string]any{"type": "string", "description": "path relative to the workdir (or absolute as the container sees it)"},
			"line":     map[string]any{"type": "integer", "minimum": 1, "description": "1-based line of the symbol"},
			"symbol":   map[string]any{"type": "string", "minLength": 1, "description": "a substring of that line naming the symbol, occurring once in it"},
			"new_name": map[string]any{"type": "string", "minLength": 1, "description": "the symbol's new name"},
		},
	}),
	ParallelSafe: false,
}

func (t renameTool) Spec() orchestrator.Spec { return renameSpec }

func (t renameTool) Call(ctx context.Context, run *orchestrator.Run, raw json.RawMessage) (*orchestrator.Result, error) {
	var a renameArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return orchestrator.Errorf("invalid arguments: %v", err), nil
	}
	return t.p.rename(ctx, run, a), nil
}

// rename asks the server, once it has loaded the project, for the
// WorkspaceEdit of a rename, applies it through the all-or-nothing writer
// (nothing is written when any file changed meanwhile, lies outside the
// workdir or cannot be edited), syncs the touched files and reports their
// edit counts and what checking the result as a user would found
// (verify). A server that exits during it is reported, never asked
// again.
func (p *Provider) rename(ctx context.Context, run *orchestrator.Run, a renameArgs) *orchestrator.Result {
	c, bad, _ := p.at(ctx, run, args{File: a.File, Line: a.Line, Symbol: a.Symbol}) // a crash is reported, never retried
	if bad != nil {
		return bad
	}
	s := c.s
	if !supports(s.caps.RenameProvider) {
		return orchestrator.Errorf("%s does not support rename (it did not offer it at initialization): rename with ast_edit or your edit tools instead", s.cfg.Name)
	}
	old := s.nameAt(c)
	if s.quirks.index != nil {
		// It knows only the files it has open: it is shown every file
		// that mentions the name first, or nothing is written.
		if err := s.quirks.index(ctx, s, old); err != nil {
			return orchestrator.Errorf("%v", err)
		}
	} else if !s.waitLoaded(ctx, c.abs) {
		return orchestrator.Errorf("%s has not finished loading the workspace (waited up to lsp.load_timeout, %s), so a rename could miss uses: nothing was written; call again in a moment",
			s.cfg.Name, s.conf.LoadTimeout)
	}
	// The project checker runs once before the write, beside the server's
	// work, so that only what the rename broke is reported after it.
	before := p.startCheck(ctx, run, s)
	defer before.stop()
	if opts, ok := s.caps.RenameProvider.(*protocol.RenameOptions); ok && opts.PrepareProvider != nil && *opts.PrepareProvider {
		var prep protocol.PrepareRenameResult
		err := s.proc.request(ctx, protocol.MethodTextDocumentPrepareRename, func(ctx context.Context) error {
			var err error
			prep, err = s.proc.api.PrepareRename(ctx, &protocol.PrepareRenameParams{TextDocumentPositionParams: c.params()})
			return err
		})
		if err != nil {
			return orchestrator.Errorf("%s cannot rename %q at %s:%d: %v", s.cfg.Name, a.Symbol, c.rel, a.Line, err)
		}
		if prep == nil {
			return orchestrator.Errorf("%s says %q at %s:%d cannot be renamed (not a renameable symbol): check the line and symbol", s.cfg.Name, a.Symbol, c.rel, a.Line)
		}
	}
	var edit *protocol.WorkspaceEdit
	err := s.proc.request(ctx, protocol.MethodTextDocumentRename, func(ctx context.Context) error {
		var err error
		edit, err = s.proc.api.Rename(ctx, &protocol.RenameParams{TextDocumentPositionParams: c.params(), NewName: a.NewName})
		return err
	})
	if err != nil {
		return orchestrator.Errorf("%s could not rename %q to %q: %v", s.cfg.Name, a.Symbol, a.NewName, err)
	}
	if edit == nil {
		return orchestrator.Errorf("%s returned no edits for renaming %q at %s:%d: nothing was written", s.cfg.Name, a.Symbol, c.rel, a.Line)
	}
	perFile, err := fileEdits(s, edit)
	if err != nil {
		return orchestrator.Errorf("%v; nothing was written", err)
	}
	root, err := run.Root()
	if err != nil {
		return orchestrator.Errorf("%v", err)
	}
	var changes []workspace.Change
	var paths []string
	counts := map[string]int{}
	for abs, edits := range perFile {
		base, open := s.docs.text(abs)
		if !open {
			b, err := s.paths.readFile(abs)
			if err != nil {
				return orchestrator.Errorf("reading %s: %v; nothing was written", workspace.Rel(run.Workdir, abs), err)
			}
			base = string(b)
		}
		if v := edits.version; v != nil && open {
			cur, _ := s.docs.version(abs)
			if *v != cur {
				return orchestrator.Errorf("%s computed the rename for version %d of %s but it has version %d: call again; nothing was written", s.cfg.Name, *v, workspace.Rel(run.Workdir, abs), cur)
			}
		}
		out, err := applyEdits(s.enc, base, edits.edits)
		if err != nil {
			return orchestrator.Errorf("%s: %v; nothing was written", workspace.Rel(run.Workdir, abs), err)
		}
		changes = append(changes, workspace.Change{Path: abs, Expected: hashOf(base), Content: []byte(out)})
		paths = append(paths, abs)
		counts[workspace.Rel(run.Workdir, abs)] = len(edits.edits)
	}
	if len(changes) == 0 {
		return orchestrator.Errorf("%s found nothing to change for renaming %q to %q: check that line and symbol name a symbol declared in the workdir", s.cfg.Name, a.Symbol, a.NewName)
	}
	baseline := before.wait() // it must not read the files being written
	if err := p.Writer.Apply(root, changes); err != nil {
		var conflict *workspace.ConflictError
		if errors.As(err, &conflict) {
			return orchestrator.Errorf("%v", err)
		}
		return orchestrator.Errorf("the rename was not written: %v", err)
	}
	v := p.verify(ctx, run, s, paths, baseline, old)
	var b strings.Builder
	total := 0
	for _, n := range counts {
		total += n
	}
	fmt.Fprintf(&b, "Renamed %q to %q: %d edit(s) in %d file(s). %s\n", a.Symbol, a.NewName, total, len(counts), v.verdict())
	rels := make([]string, 0, len(counts))
	for r := range counts {
		rels = append(rels, r)
	}
	sort.Strings(rels)
	for _, r := range rels {
		fmt.Fprintf(&b, "  %s: %d edit(s)\n", text.Path(r), counts[r])
	}
	b.WriteString(v.details(p.conf.MaxTotal))
	return orchestrator.Text(strings.TrimRight(b.String(), "\n"))
}

// editSet is the edits for one file and the version they were made for.
type editSet struct {
	version *int32
	edits   []protocol.TextEdit
}

// fileEdits flattens a WorkspaceEdit into text edits per file, keyed by
// the file each URI resolves to (pathMap.locate). A URI that resolves
// outside the workdir refuses the whole rename, naming every such file;
// so does a file operation (create, rename, delete).
func fileEdits(s *server, we *protocol.WorkspaceEdit) (map[string]*editSet, error) {
	out := map[string]*editSet{}
	var outside []string
	type placed struct {
		abs    string
		inside bool
	}
	seen := map[uri.URI]placed{} // a file's many edits name it alike
	place := func(u uri.URI) (string, bool) {
		p, ok := seen[u]
		if !ok {
			p.abs, p.inside = s.paths.locate(u, s.paths.ws().Resolve)
			seen[u] = p
			if !p.inside && !slices.Contains(outside, s.paths.outsideName(p.abs)) {
				outside = append(outside, s.paths.outsideName(p.abs))
			}
		}
		return p.abs, p.inside
	}
	add := func(u uri.URI, v *int32, e protocol.TextEdit) {
		abs, inside := place(u)
		if !inside {
			return
		}
		if out[abs] == nil {
			out[abs] = &editSet{version: v}
		}
		out[abs].edits = append(out[abs].edits, e)
	}
	for u, es := range we.Changes {
		for _, e := range es {
			add(u, nil, e)
		}
	}
	fileOps := false
	for _, dc := range we.DocumentChanges {
		td, ok := dc.(*protocol.TextDocumentEdit)
		if !ok {
			fileOps = true
			switch op := dc.(type) {
			case *protocol.CreateFile:
				place(op.URI)
			case *protocol.RenameFile:
				place(op.OldURI)
				place(op.NewURI)
			case *protocol.DeleteFile:
				place(op.URI)
			}
			continue
		}
		for _, el := range td.Edits {
			switch e := el.(type) {
			case *protocol.TextEdit:
				add(td.TextDocument.URI, td.TextDocument.Version, *e)
			case *protocol.AnnotatedTextEdit:
				add(td.TextDocument.URI, td.TextDocument.Version, e.TextEdit)
			case *protocol.SnippetTextEdit:
				add(td.TextDocument.URI, td.TextDocument.Version, protocol.TextEdit{Range: e.Range, NewText: e.Snippet.Value})
			}
		}
	}
	if len(outside) > 0 {
		sort.Strings(outside)
		return nil, fmt.Errorf("the rename would change %d file(s) outside the working directory, so it is refused as a whole: %s. "+
			"They belong to a dependency, the standard library or a folder linked into the workdir; rename only inside the workdir with ast_edit or your edit tools",
			len(outside), strings.Join(outside, ", "))
	}
	if fileOps {
		return nil, fmt.Errorf("%s's rename also creates, renames or deletes files, which lsp_rename does not do: make that change with your own tools", s.cfg.Name)
	}
	return out, nil
}

// applyEdits applies non-overlapping edits to text.
func applyEdits(enc encoding, text string, edits []protocol.TextEdit) (string, error) {
	type span struct {
		start, end int
		text       string
	}
	offset := func(p protocol.Position) (int, error) {
		lt, start, err := lineAt(text+"\n", int(p.Line)+1)
		if err != nil {
			return 0, fmt.Errorf("an edit points outside the file (line %d)", p.Line+1)
		}
		return start + enc.fromServer(lt, p.Character), nil
	}
	spans := make([]span, 0, len(edits))
	for _, e := range edits {
		a, err := offset(e.Range.Start)
		if err != nil {
			return "", err
		}
		b, err := offset(e.Range.End)
		if err != nil {
			return "", err
		}
		if b < a || b > len(text) {
			return "", fmt.Errorf("an edit has an invalid range at line %d", e.Range.Start.Line+1)
		}
		spans = append(spans, span{a, b, e.NewText})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	var b strings.Builder
	last := 0
	for _, sp := range spans {
		if sp.start < last {
			return "", errors.New("the server sent overlapping edits")
		}
		b.WriteString(text[last:sp.start])
		b.WriteString(sp.text)
		last = sp.end
	}
	b.WriteString(text[last:])
	return b.String(), nil
}
