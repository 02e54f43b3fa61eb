package lsp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.lsp.dev/protocol"

	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/workspace"
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
	s   *server
	abs string
	rel string
	pos protocol.Position
	end protocol.Position
}

// at finds the file's server, syncs the file and resolves line + symbol.
// lost says how the server was lost while the file was being synced.
func (p *Provider) at(ctx context.Context, run *orchestrator.Run, a args) (c *cursor, bad *orchestrator.Result, lost loss) {
	abs, s, bad := p.fileServer(ctx, run, a.File)
	if bad != nil {
		return nil, bad, kept
	}
	doc, err := s.syncFor(ctx, abs)
	if err != nil {
		return nil, orchestrator.Errorf("%s: %v", s.cfg.Name, err), lossOf(err)
	}
	lt, _, err := lineAt(doc.text, a.Line)
	if err != nil {
		return nil, orchestrator.Errorf("%s: %v", a.File, err), kept
	}
	col, err := symbolColumn(lt, a.Line, a.Symbol)
	if err != nil {
		return nil, orchestrator.Errorf("%s: %v", a.File, err), kept
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
	return &cursor{s: s, abs: abs, rel: workspace.Rel(run.Workdir, abs),
		pos: protocol.Position{Line: line, Character: s.enc.toServer(lt, col)},
		end: protocol.Position{Line: line, Character: s.enc.toServer(lt, end)}}, nil, kept
}

// retried runs a read-only query and asks it again when its server was
// lost under it: a query has no effect that asking twice could repeat.
// A server that crashed is restarted by the supervisor (with backoff, up
// to its cap), and the query is asked once more: the second answer
// stands, whatever it is. A server replaced on purpose (a reload by
// another call) says nothing about the next one, so the query follows
// it, up to maxReplaced times: calls racing reloads get answers, not
// "call again". lsp_rename never comes here: a write is not repeated
// behind the model's back.
func retried(ctx context.Context, query func() (res *orchestrator.Result, lost loss)) *orchestrator.Result {
	crashes, replacements := 0, 0
	for {
		res, lost := query()
		switch {
		case lost == kept || ctx.Err() != nil:
			return res
		case lost == crashed:
			crashes++
			if crashes > 1 {
				return res
			}
		default:
			replacements++
			if replacements > maxReplaced {
				return res
			}
		}
	}
}

// maxReplaced is how many times a query follows its server to the one
// that replaced it on purpose.
const maxReplaced = 4

// loss says how a query lost its server: not at all (kept), to a reload
// or the run's end (replaced), or to a crash (crashed). A query that
// asked several servers reports the worst.
type loss int

const (
	kept loss = iota
	replaced
	crashed
)

// err is the error a request that lost its server this way wraps, as
// lossOf reads it back.
func (l loss) err() error {
	if l == replaced {
		return errReplaced
	}
	return errExited
}

// advice says what to do after a call lost its server this way: call
// again, of the server that replaced it or of the one restarted after
// its crash.
func (l loss) advice() string {
	if l == replaced {
		return "Berth closed it on purpose (a reload, or the run's end): call again"
	}
	return "it is restarted on the next call: call again (lsp status shows its stderr)"
}

// lossOf says how the server of a failed request was lost (errExited,
// errReplaced), if it was.
func lossOf(err error) loss {
	switch {
	case errors.Is(err, errReplaced):
		return replaced
	case errors.Is(err, errExited):
		return crashed
	}
	return kept
}

// params is the cursor as a request's text document and position.
func (c *cursor) params() protocol.TextDocumentPositionParams {
	return protocol.TextDocumentPositionParams{TextDocument: protocol.TextDocumentIdentifier{URI: c.s.paths.toURI(c.abs)}, Position: c.pos}
}

// query is a position action's request at a cursor, whose answer r
// renders under the head what.
type query struct {
	c    *cursor
	a    args
	r    *lines
	what string
}

// asker sends a position action's request and returns how to render its
// answer: rendering comes after, so the request's time
// (berth_lsp_request_duration_seconds) is the server's.
type asker func(ctx context.Context, q *query) (render func() string, err error)

// asking makes an asker of a request builder and its answer's renderer.
func asking[R any](send func(ctx context.Context, q *query) (R, error), render func(q *query, res R) string) asker {
	return func(ctx context.Context, q *query) (func() string, error) {
		res, err := send(ctx, q)
		return func() string { return render(q, res) }, err
	}
}

// navigate runs a position action (actionTable); lost says how the server
// was lost during the query.
func (p *Provider) navigate(ctx context.Context, run *orchestrator.Run, a args, act *action) (*orchestrator.Result, loss) {
	c, bad, lost := p.at(ctx, run, a)
	if bad != nil {
		return bad, lost
	}
	s := c.s
	if !supports(act.capability(&s.caps)) {
		return orchestrator.Errorf("%s does not support %s (it did not offer it at initialization); try another action, or ast_grep", s.cfg.Name, a.Action), kept
	}
	note := ""
	if act.list {
		note = s.loadNote(ctx, c.abs)
	}
	q := &query{c: c, a: a, r: newLines(s),
		what: fmt.Sprintf("%s of %q at %s:%d", strings.ReplaceAll(a.Action, "_", " "), a.Symbol, c.rel, a.Line)}
	if act.list {
		// Long lists: while the server works, check on disk the files
		// the last one showed, so this one's source lines need no look.
		q.r.since = time.Now()
		var rechecked sync.WaitGroup
		rechecked.Go(func() { s.cache.recheck(q.r.since) })
		defer q.r.remember()
		defer rechecked.Wait()
	}
	var render func() string
	err := s.proc.request(ctx, act.method, func(ctx context.Context) error {
		var err error
		render, err = act.ask(ctx, q)
		return err
	})
	if err != nil {
		return orchestrator.Errorf("%s could not answer %s: %s%s", s.cfg.Name, a.Action, text.Indent(err.Error(), "  "), advice(err)), lossOf(err)
	}
	return orchestrator.Text(withNote(render(), note)), kept
}

// renderDefinitions lists the places a definition-like answer names.
func renderDefinitions(q *query, res protocol.DefinitionResult) string {
	return q.r.listLocations(q.r.definitionSpots(res), maxLocations, q.what)
}

// renderReferences lists the references found.
func renderReferences(q *query, res []protocol.Location) string {
	spots := make([]spot, 0, len(res))
	for _, l := range res {
		spots = append(spots, q.r.spot(l.URI, l.Range.Start))
	}
	return q.r.listLocations(spots, maxReferences, q.what)
}

// renderHover is the hover text, or says there is none.
func renderHover(q *query, res *protocol.Hover) string {
	if res == nil || strings.TrimSpace(hoverText(res.Contents)) == "" {
		return fmt.Sprintf("%s has no hover information for %q at %s:%d", q.c.s.cfg.Name, q.a.Symbol, q.c.rel, q.a.Line)
	}
	return strings.TrimSpace(hoverText(res.Contents))
}

// renderCodeActions lists the code actions offered (codeActionsText).
func renderCodeActions(q *query, res []protocol.CommandOrCodeAction) string {
	return codeActionsText(res, q.what, q.a.All)
}

// onLine keeps the diagnostics whose range covers line: the context a
// server needs to offer quick fixes there.
func onLine(ds []protocol.Diagnostic, line uint32) []protocol.Diagnostic {
	out := []protocol.Diagnostic{}
	for _, d := range ds {
		if d.Range.Start.Line <= line && line <= d.Range.End.Line {
			out = append(out, d)
		}
	}
	return out
}

// codeActionsText lists code actions, quick fixes first, capped, without
// applying them. Unless all is set, entries that change no code are left
// out and counted (changesCode).
func codeActionsText(res []protocol.CommandOrCodeAction, what string, all bool) string {
	var fixes, others, hidden []string
	for _, a := range res {
		switch v := a.(type) {
		case *protocol.Command:
			if !all {
				hidden = append(hidden, text.Line(v.Title))
				continue
			}
			others = append(others, fmt.Sprintf("- %s (command %s)", text.Line(v.Title), text.Line(v.Command)))
		case *protocol.CodeAction:
			if !all && !changesCode(v) {
				hidden = append(hidden, text.Line(v.Title))
				continue
			}
			line := "- " + text.Line(v.Title)
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
			if isKind(v.Kind, protocol.CodeActionKindQuickFix) {
				fixes = append(fixes, line)
			} else {
				others = append(others, line)
			}
		}
	}
	listed := append(fixes, others...)
	note := ""
	if len(hidden) > 0 {
		more := " more"
		if len(listed) == 0 {
			more = ""
		}
		note = fmt.Sprintf("%d%s with no edit, such as %q, left out: pass \"all\": true to list them", len(hidden), more, hidden[0])
	}
	switch {
	case len(listed) == 0 && len(hidden) > 0:
		return withNote(what+": none that change code", note)
	case len(listed) == 0:
		return what + ": the server offers none here"
	}
	var b strings.Builder
	b.WriteString(withNote(countLine(what, len(listed), maxCodeActions), note) + "\n")
	for _, l := range listed[:min(len(listed), maxCodeActions)] {
		b.WriteString(l + "\n")
	}
	b.WriteString("Code actions are listed, not applied: make the change with your edit tools or lsp_rename.")
	return b.String()
}

// changesCode says whether a code action changes code: it carries an
// edit, or its kind is one whose command edits (a quick fix, a refactor,
// organize imports, fix all; typescript-language-server's refactors, for
// one, are commands). Other command-only entries, such as gopls's
// source.doc, source.assembly and source.freesymbols ("Browse …"), show
// something and change nothing.
func changesCode(a *protocol.CodeAction) bool {
	if a.Edit != nil {
		return true
	}
	for _, k := range []protocol.CodeActionKind{protocol.CodeActionKindQuickFix, protocol.CodeActionKindRefactor,
		protocol.CodeActionKindSourceOrganizeImports, protocol.CodeActionKindSourceFixAll} {
		if isKind(a.Kind, k) {
			return true
		}
	}
	return false
}

// isKind says whether kind is k or one of its sub-kinds
// ("refactor.extract" is a "refactor").
func isKind(kind *protocol.CodeActionKind, k protocol.CodeActionKind) bool {
	return kind != nil && (*kind == k || strings.HasPrefix(string(*kind), string(k)+"."))
}

// diagnostics runs the project checker for file "*", else reports the
// file's diagnostics.
func (p *Provider) diagnostics(ctx context.Context, run *orchestrator.Run, a args) (*orchestrator.Result, loss) {
	if a.File == "*" {
		return p.checker(ctx, run), kept
	}
	return p.fileDiagnostics(ctx, run, a)
}

// fileDiagnostics reports the diagnostics of the file's current content;
// lost says how the server was lost before it answered.
func (p *Provider) fileDiagnostics(ctx context.Context, run *orchestrator.Run, a args) (*orchestrator.Result, loss) {
	abs, s, bad := p.fileServer(ctx, run, a.File)
	if bad != nil {
		return bad, kept
	}
	doc, err := s.syncFor(ctx, abs)
	if err != nil {
		return orchestrator.Errorf("%s: %v", s.cfg.Name, err), lossOf(err)
	}
	items, ok := s.diagnose(ctx, abs, doc)
	rel := workspace.Rel(run.Workdir, abs)
	if !ok && !s.proc.alive() {
		lost := s.proc.loss()
		return orchestrator.Errorf("%s exited before it gave the diagnostics of %s: the state is unknown, not clean; %s", s.cfg.Name, rel, lost.advice()), lost
	}
	if !ok {
		return orchestrator.Errorf("%s gave no diagnostics for %s within %s (it may still be loading): the state is unknown, not clean; call again, or run diagnostics \"*\"",
			s.cfg.Name, rel, s.conf.DiagnosticsTimeout), kept
	}
	all := s.convert(abs, items, doc.text)
	ds := problems(all)
	advice := ""
	if n := len(all) - len(ds); n > 0 {
		advice = fmt.Sprintf(" (and %d hint(s) or note(s), not listed)", n)
	}
	if len(ds) == 0 {
		return orchestrator.Textf("%s: no errors or warnings from %s%s", rel, s.cfg.Name, advice), kept
	}
	_, text := capped(ds, maxFileDiagnostics, maxFileDiagnostics)
	return orchestrator.Textf("%s: %d error(s) and warning(s) from %s%s\n%s", rel, len(ds), s.cfg.Name, advice, text), kept
}
