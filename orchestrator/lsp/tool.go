package lsp

import (
	"context"
	"encoding/json"

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

var actions = []string{"diagnostics", "definition", "type_definition", "implementation", "references",
	"hover", "symbols", "code_actions", "status", "reload"}

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
			"action": map[string]any{"type": "string", "enum": actions, "description": "what to ask"},
			"file":   map[string]any{"type": "string", "description": "path relative to the workdir; \"*\" with diagnostics runs the project checker"},
			"line":   map[string]any{"type": "integer", "minimum": 1, "description": "1-based line of the symbol"},
			"symbol": map[string]any{"type": "string", "minLength": 1, "description": "a substring of that line naming the symbol, occurring once in it"},
			"query":  map[string]any{"type": "string", "description": "symbols: the name (or part of it) to search the workspace for"},
			"all":    map[string]any{"type": "boolean", "description": "code_actions: also list the entries that change no code (browse documentation, assembly, ...)"},
		},
	}, "action",
		// What each action needs, where the model reads it; the registry
		// refuses a call without it. An empty file or query is as good as
		// none: status and reload take one, so only these links refuse it.
		orchestrator.When{Values: []string{"definition", "type_definition", "implementation", "references", "hover", "code_actions"}, Then: map[string]any{
			"description": `pass "file", the 1-based "line" and "symbol", a substring of that line that names the symbol (a column is never guessed)`,
			"required":    []string{"file", "line", "symbol"},
			"properties":  map[string]any{"file": nonEmpty},
		}},
		orchestrator.When{Values: []string{"diagnostics"}, Then: map[string]any{
			"description": `a path, or "*" to run the project checker`,
			"required":    []string{"file"},
			"properties":  map[string]any{"file": nonEmpty},
		}},
		orchestrator.When{Values: []string{"symbols"}, Then: map[string]any{
			"description": `pass "query" to search the workspace, or "file" to list that file's symbols`,
			"if":          map[string]any{"required": []string{"file"}, "properties": map[string]any{"file": nonEmpty}},
			"else":        map[string]any{"required": []string{"query"}, "properties": map[string]any{"query": nonEmpty}},
		}},
	),
	ParallelSafe: true,
}

// nonEmpty is a string argument an action needs, where "" says nothing.
var nonEmpty = map[string]any{"minLength": 1}

func (t lspTool) Spec() orchestrator.Spec { return lspSpec }

// Call runs the action, whose arguments the registry has checked against
// the schema; read-only queries are retried once when their server exits
// under them (retried).
func (t lspTool) Call(ctx context.Context, run *orchestrator.Run, raw json.RawMessage) (*orchestrator.Result, error) {
	var a args
	if err := json.Unmarshal(raw, &a); err != nil {
		return orchestrator.Errorf("invalid arguments: %v", err), nil
	}
	p := t.p
	switch a.Action {
	case "status":
		return p.status(ctx, run, a), nil
	case "reload":
		return p.reload(ctx, run, a), nil
	case "symbols":
		if a.Query != "" {
			return retried(ctx, func() (*orchestrator.Result, bool) { return p.workspaceSymbols(ctx, run, a) }), nil
		}
		return retried(ctx, func() (*orchestrator.Result, bool) { return p.documentSymbols(ctx, run, a) }), nil
	case "diagnostics":
		if a.File == "*" {
			return p.checker(ctx, run), nil
		}
		return retried(ctx, func() (*orchestrator.Result, bool) { return p.fileDiagnostics(ctx, run, a) }), nil
	}
	return retried(ctx, func() (*orchestrator.Result, bool) { return p.navigate(ctx, run, a) }), nil
}
