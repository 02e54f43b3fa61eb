package lsp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"go.lsp.dev/protocol"
)

// client answers what a language server asks of Berth: it records
// diagnostics and progress and answers configuration requests. Its methods
// run in turn, one message after the other, before the next message is
// read (connect), so none of them blocks.
type client struct {
	protocol.UnimplementedClient
	s *server
}

var _ protocol.Client = (*client)(nil)

// PublishDiagnostics records a file's newest diagnostics and the version
// they are for (-1 when the server gave none).
func (c *client) PublishDiagnostics(_ context.Context, p *protocol.PublishDiagnosticsParams) error {
	v, ok := p.Version.Get()
	if !ok {
		v = -1
	}
	// Keyed like the files the model names.
	abs, inside := c.s.paths.locate(p.URI, c.s.paths.ws().Resolve)
	c.s.diags.publish(abs, v, p.Diagnostics, !inside)
	return nil
}

// Progress tracks work-done progress, by which most servers say they
// have loaded the project (loadState.progressed).
func (c *client) Progress(_ context.Context, p *protocol.ProgressParams) error {
	var v struct {
		Kind  string `json:"kind"`
		Title string `json:"title"`
	}
	if json.Unmarshal(p.Value, &v) == nil {
		c.s.load.progressed(fmt.Sprint(p.Token), v.Kind, v.Title)
	}
	return nil
}

func (c *client) WorkDoneProgressCreate(context.Context, *protocol.WorkDoneProgressCreateParams) error {
	return nil
}

// Configuration answers a workspace/configuration request from the
// entry's Settings (see ConfigurationAnswer).
func (c *client) Configuration(_ context.Context, p *protocol.ConfigurationParams) ([]protocol.LSPAny, error) {
	return ConfigurationAnswer(c.s.cfg.Settings, p.Items), nil
}

// ConfigurationAnswer is Berth's answer to a server's
// workspace/configuration request: each item gets the section of
// settings it names (a dotted path; all of settings for no section), or
// null. images/lsp/warm answers with it too: what a client answers is
// part of gopls's cache keys.
func ConfigurationAnswer(settings map[string]any, items []protocol.ConfigurationItem) []protocol.LSPAny {
	out := make([]protocol.LSPAny, len(items))
	for i, it := range items {
		var v any = settings
		if it.Section != nil && *it.Section != "" {
			for _, part := range strings.Split(*it.Section, ".") {
				m, ok := v.(map[string]any)
				if !ok {
					v = nil
					break
				}
				v = m[part]
			}
		}
		b, err := json.Marshal(v)
		if err != nil {
			b = []byte("null")
		}
		out[i] = protocol.LSPAny(b)
	}
	return out
}

func (c *client) WorkspaceFolders(context.Context) ([]protocol.WorkspaceFolder, error) {
	return []protocol.WorkspaceFolder{c.s.paths.folder()}, nil
}

func (c *client) RegisterCapability(context.Context, *protocol.RegistrationParams) error { return nil }

func (c *client) UnregisterCapability(context.Context, *protocol.UnregistrationParams) error {
	return nil
}

func (c *client) ShowMessage(_ context.Context, p *protocol.ShowMessageParams) error {
	if p.Type == protocol.MessageTypeError || p.Type == protocol.MessageTypeWarning {
		fmt.Fprintf(c.s.proc.stderr, "[window/showMessage] %s\n", p.Message)
	}
	if p.Type == protocol.MessageTypeError && !c.s.complained.Swap(true) {
		go func() { _ = c.s.keep.Load().update(func(d *keptServer) { d.Complained = true }) }() // never blocks the read goroutine
	}
	return nil
}

func (c *client) LogMessage(_ context.Context, p *protocol.LogMessageParams) error {
	c.s.load.logged(p.Message)
	if p.Type == protocol.MessageTypeError {
		fmt.Fprintf(c.s.proc.stderr, "[window/logMessage] %s\n", p.Message)
	}
	return nil
}

func (c *client) ShowMessageRequest(context.Context, *protocol.ShowMessageRequestParams) (*protocol.MessageActionItem, error) {
	return nil, nil
}

// ApplyEdit refuses: Berth writes files only through lsp_rename's
// all-or-nothing writer, never at a server's request.
func (c *client) ApplyEdit(context.Context, *protocol.ApplyWorkspaceEditParams) (*protocol.ApplyWorkspaceEditResult, error) {
	reason := "Berth applies edits only through lsp_rename"
	return &protocol.ApplyWorkspaceEditResult{Applied: false, FailureReason: &reason}, nil
}

func (c *client) Telemetry(context.Context, protocol.LSPAny) error         { return nil }
func (c *client) CodeLensRefresh(context.Context) error                    { return nil }
func (c *client) FoldingRangeRefresh(context.Context) error                { return nil }
func (c *client) SemanticTokensRefresh(context.Context) error              { return nil }
func (c *client) InlineValueRefresh(context.Context) error                 { return nil }
func (c *client) InlayHintRefresh(context.Context) error                   { return nil }
func (c *client) DiagnosticRefresh(context.Context) error                  { return nil }
func (c *client) LogTrace(context.Context, *protocol.LogTraceParams) error { return nil }
