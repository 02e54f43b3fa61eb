package lsp

import (
	"context"
	"encoding/json"
	"strings"

	"go.lsp.dev/protocol"

	"github.com/berth-dev/berth/orchestrator"
)

// lspTool is the read-only lsp tool.
type lspTool struct{ p *Provider }

// args are lsp's arguments; which are needed depends on the action.
type args struct {
	Action string `json:"action"`
	File   string `json:"file"`
	Line   int    `json:"line"`
	Symbol string `json:"symbol"`
	Query  string `json:"query"`
	All    bool   `json:"all"`
}

// action is one value of lsp's "action"; actionTable lists them all, and
// adding an action is adding its row. needs is what it takes beyond
// "action" (a link of the schema). A position action (ask set) runs at
// the line and symbol (navigate): refused unless the server offers the
// capability, asked as method, its answer rendered after. Any other
// action runs by itself (run).
type action struct {
	name  string
	needs *need

	capability func(*protocol.ServerCapabilities) any
	method     string
	list       bool // a workspace-wide list: it waits for the load (loadNote) and rechecks the last list's files
	ask        asker

	// run answers; lost says how its server was lost during the query.
	run func(p *Provider, ctx context.Context, run *orchestrator.Run, a args) (res *orchestrator.Result, lost loss)
}

var actionTable = []action{
	{name: "diagnostics", needs: needsFile, run: (*Provider).diagnostics},
	{name: "definition", needs: atPosition, method: protocol.MethodTextDocumentDefinition,
		capability: func(c *protocol.ServerCapabilities) any { return c.DefinitionProvider },
		ask: asking(func(ctx context.Context, q *query) (protocol.DefinitionResult, error) {
			return q.c.s.proc.api.Definition(ctx, &protocol.DefinitionParams{TextDocumentPositionParams: q.c.params()})
		}, renderDefinitions)},
	{name: "type_definition", needs: atPosition, method: protocol.MethodTextDocumentTypeDefinition,
		capability: func(c *protocol.ServerCapabilities) any { return c.TypeDefinitionProvider },
		ask: asking(func(ctx context.Context, q *query) (protocol.DefinitionResult, error) {
			return q.c.s.proc.api.TypeDefinition(ctx, &protocol.TypeDefinitionParams{TextDocumentPositionParams: q.c.params()})
		}, renderDefinitions)},
	{name: "implementation", needs: atPosition, method: protocol.MethodTextDocumentImplementation, list: true,
		capability: func(c *protocol.ServerCapabilities) any { return c.ImplementationProvider },
		ask: asking(func(ctx context.Context, q *query) (protocol.DefinitionResult, error) {
			return q.c.s.proc.api.Implementation(ctx, &protocol.ImplementationParams{TextDocumentPositionParams: q.c.params()})
		}, renderDefinitions)},
	{name: "references", needs: atPosition, method: protocol.MethodTextDocumentReferences, list: true,
		capability: func(c *protocol.ServerCapabilities) any { return c.ReferencesProvider },
		ask: asking(func(ctx context.Context, q *query) ([]protocol.Location, error) {
			return q.c.s.proc.api.References(ctx, &protocol.ReferenceParams{TextDocumentPositionParams: q.c.params(),
				Context: protocol.ReferenceContext{IncludeDeclaration: true}})
		}, renderReferences)},
	{name: "hover", needs: atPosition, method: protocol.MethodTextDocumentHover,
		capability: func(c *protocol.ServerCapabilities) any { return c.HoverProvider },
		ask: asking(func(ctx context.Context, q *query) (*protocol.Hover, error) {
			return q.c.s.proc.api.Hover(ctx, &protocol.HoverParams{TextDocumentPositionParams: q.c.params()})
		}, renderHover)},
	{name: "symbols", needs: queryOrFile, run: (*Provider).symbols},
	{name: "code_actions", needs: atPosition, method: protocol.MethodTextDocumentCodeAction,
		capability: func(c *protocol.ServerCapabilities) any { return c.CodeActionProvider },
		ask: asking(func(ctx context.Context, q *query) ([]protocol.CommandOrCodeAction, error) {
			s := q.c.s
			return s.proc.api.CodeAction(ctx, &protocol.CodeActionParams{
				TextDocument: protocol.TextDocumentIdentifier{URI: s.paths.toURI(q.c.abs)},
				Range:        protocol.Range{Start: q.c.pos, End: q.c.end},
				Context:      protocol.CodeActionContext{Diagnostics: onLine(s.diags.latest(q.c.abs), q.c.pos.Line)},
			})
		}, renderCodeActions)},
	{name: "status", run: once((*Provider).status)},
	{name: "reload", run: once((*Provider).reload)},
}

// need is what some actions take beyond "action": a link of the schema's
// if/then/else chain (orchestrator.Chain), where the model reads it and
// the registry refuses a call without it. An empty file or query is as
// good as none: status and reload take one, so only these refuse it.
type need struct{ then map[string]any }

var (
	atPosition = &need{map[string]any{
		"description": `pass "file", the 1-based "line" and "symbol", a substring of that line that names the symbol (a column is never guessed)`,
		"required":    []string{"file", "line", "symbol"},
		"properties":  map[string]any{"file": nonEmpty},
	}}
	needsFile = &need{map[string]any{
		"description": `a path, or "*" to run the project checker`,
		"required":    []string{"file"},
		"properties":  map[string]any{"file": nonEmpty},
	}}
	queryOrFile = &need{map[string]any{
		"description": `pass "query" to search the workspace, or "file" to list that file's symbols`,
		"if":          map[string]any{"required": []string{"file"}, "properties": map[string]any{"file": nonEmpty}},
		"else":        map[string]any{"required": []string{"query"}, "properties": map[string]any{"query": nonEmpty}},
	}}
)

// nonEmpty is a string argument an action needs, where "" says nothing.
var nonEmpty = map[string]any{"minLength": 1}

// actionNames lists the actions in the table's order, the schema's enum.
func actionNames() []string {
	names := make([]string, len(actionTable))
	for i, act := range actionTable {
		names[i] = act.name
	}
	return names
}

// actionNeeds is the schema's chain: one link per need, naming the
// actions that share it.
func actionNeeds() []orchestrator.When {
	var links []orchestrator.When
	at := map[*need]int{}
	for _, act := range actionTable {
		if act.needs == nil {
			continue
		}
		i, ok := at[act.needs]
		if !ok {
			i = len(links)
			at[act.needs] = i
			links = append(links, orchestrator.When{Then: act.needs.then})
		}
		links[i].Values = append(links[i].Values, act.name)
	}
	return links
}

// actionNamed finds an action's row.
var actionNamed = func() map[string]*action {
	m := make(map[string]*action, len(actionTable))
	for i := range actionTable {
		m[actionTable[i].name] = &actionTable[i]
	}
	return m
}()

// once adapts an action that never asks a server a query worth asking
// twice: it reports no lost server, so retried runs it once.
func once(f func(p *Provider, ctx context.Context, run *orchestrator.Run, a args) *orchestrator.Result) func(*Provider, context.Context, *orchestrator.Run, args) (*orchestrator.Result, loss) {
	return func(p *Provider, ctx context.Context, run *orchestrator.Run, a args) (*orchestrator.Result, loss) {
		return f(p, ctx, run, a), kept
	}
}

// lspSpec is built once: the registry asks for it on every call.
var lspSpec = orchestrator.Spec{
	Name: "lsp",
	Tier: orchestrator.Read,
	Description: `Ask the project's language server (gopls, pyright or pylsp, clangd, typescript-language-server, rust-analyzer, dart) about code.
Positions are a 1-based "line" plus "symbol", a substring of that line that names the symbol (the cursor goes to the last identifier in it: "auth.login" means login; that identifier must be whole there, not part of a longer one). Never a column. An ambiguous symbol is refused with a substring for each place it may mean.
Actions:
- diagnostics {file}: errors and warnings of the file; file "*" runs the project checker (go vet, pyright, tsc, cargo check, ...) in each project root instead.
- definition / type_definition / implementation / references / hover / code_actions {file, line, symbol}. code_actions lists quick fixes first and leaves out entries that change no code (add "all": true to list them).
- symbols {query} searches the workspace's own code, best matches first (add file to pick its server); symbols {file} lists the file's symbols as a tree.
- status {file?}: which servers run for which roots, and for each known server whether its root marker and executable were found (use it when nothing works).
- reload {file?}: restart the server for that file's root (all servers without file).
Locations come back as path:line:col: source line, paths relative to the workdir; long lists say "showing N of M".`,
	InputSchema: orchestrator.Chain(map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []string{"action"},
		"properties": map[string]any{
			"action": map[string]any{"type": "string", "enum": actionNames(), "description": "what to ask"},
			"file":   map[string]any{"type": "string", "description": "path relative to the workdir (or absolute as the container sees it); \"*\" with diagnostics runs the project checker"},
			"line":   map[string]any{"type": "integer", "minimum": 1, "description": "1-based line of the symbol"},
			"symbol": map[string]any{"type": "string", "minLength": 1, "description": "a substring of that line naming the symbol, occurring once in it"},
			"query":  map[string]any{"type": "string", "description": "symbols: the name (or part of it) to search the workspace for"},
			"all":    map[string]any{"type": "boolean", "description": "code_actions: also list the entries that change no code (browse documentation, assembly, ...)"},
		},
	}, "action", actionNeeds()...),
	ParallelSafe: true,
}

func (t lspTool) Spec() orchestrator.Spec { return lspSpec }

// Call runs the action, whose arguments the registry has checked against
// the schema; read-only queries are asked again when their server is
// lost under them (retried).
func (t lspTool) Call(ctx context.Context, run *orchestrator.Run, raw json.RawMessage) (*orchestrator.Result, error) {
	var a args
	if err := json.Unmarshal(raw, &a); err != nil {
		return orchestrator.Errorf("invalid arguments: %v", err), nil
	}
	act, ok := actionNamed[a.Action]
	if !ok {
		return orchestrator.Errorf("unknown action %q: use one of %s", a.Action, strings.Join(actionNames(), ", ")), nil
	}
	return retried(ctx, func() (*orchestrator.Result, loss) {
		if act.ask != nil {
			return t.p.navigate(ctx, run, a, act)
		}
		return act.run(t.p, ctx, run, a)
	}), nil
}
