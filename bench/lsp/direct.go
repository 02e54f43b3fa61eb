package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"

	"github.com/berth-dev/berth/orchestrator/lsp"
)

// direct is a minimal LSP client of its own gopls: the alternative a user
// would write, with nothing Berth does around the request.
type direct struct {
	cmd     *exec.Cmd
	conn    jsonrpc2.Conn
	api     protocol.Server
	version int32

	mu        sync.Mutex
	published chan string // uris, as gopls publishes them
	loaded    chan struct{}
	active    map[string]bool
	once      sync.Once
}

type pipes struct {
	io.Reader
	io.WriteCloser
}

func startDirect(ctx context.Context, root string) (*direct, error) {
	cmd := exec.Command("gopls")
	cmd.Dir = root
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &direct{cmd: cmd, published: make(chan string, 1024), loaded: make(chan struct{}), active: map[string]bool{}}
	_, d.conn, d.api = protocol.NewClient(context.Background(), &directClient{d: d}, jsonrpc2.NewHeaderStream(pipes{stdout, stdin}))
	params := map[string]any{
		"processId": os.Getpid(), "rootUri": uri.File(root), "rootPath": root, "clientInfo": map[string]any{"name": "bench-direct"},
		"workspaceFolders":      []protocol.WorkspaceFolder{{URI: uri.File(root), Name: filepath.Base(root)}},
		"capabilities":          lsp.ClientCapabilities(),                 // as Berth declares them: the same work
		"initializationOptions": map[string]any{"diagnosticsDelay": "0s"}, // as Berth's catalog entry
	}
	var raw jsonrpc2.RawMessage
	if _, err := d.conn.Call(ctx, protocol.MethodInitialize, params, &raw); err != nil {
		return nil, fmt.Errorf("direct gopls initialize: %w", err)
	}
	if err := d.api.Initialized(ctx, &protocol.InitializedParams{}); err != nil {
		return nil, err
	}
	return d, nil
}

// open sends didOpen once per file.
func (d *direct) open(ctx context.Context, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return d.api.DidOpen(ctx, &protocol.DidOpenTextDocumentParams{TextDocument: protocol.TextDocumentItem{
		URI: uri.File(path), LanguageID: "go", Version: 1, Text: string(b)}})
}

var opened = map[string]bool{}

// request sends one definition or references request and times it.
func (d *direct) request(ctx context.Context, action, path string, line, col int) (time.Duration, error) {
	if !opened[path] {
		opened[path] = true
		if err := d.open(ctx, path); err != nil {
			return 0, err
		}
		select { // as Berth does, references wait for the initial load
		case <-d.loaded:
		case <-time.After(2 * time.Minute):
		}
	}
	pos := protocol.TextDocumentPositionParams{TextDocument: protocol.TextDocumentIdentifier{URI: uri.File(path)},
		Position: protocol.Position{Line: uint32(line), Character: uint32(col)}}
	start := time.Now()
	var err error
	switch action {
	case "definition":
		_, err = d.api.Definition(ctx, &protocol.DefinitionParams{TextDocumentPositionParams: pos})
	case "references":
		_, err = d.api.References(ctx, &protocol.ReferenceParams{TextDocumentPositionParams: pos, Context: protocol.ReferenceContext{IncludeDeclaration: true}})
	}
	return time.Since(start), err
}

// write sends the new content and times it to gopls's first publish for
// the file.
func (d *direct) write(ctx context.Context, path, text string) (time.Duration, error) {
	u := uri.File(path)
	d.version++
	for len(d.published) > 0 {
		<-d.published
	}
	start := time.Now()
	var err error
	if d.version == 1 {
		err = d.api.DidOpen(ctx, &protocol.DidOpenTextDocumentParams{TextDocument: protocol.TextDocumentItem{URI: u, LanguageID: "go", Version: 1, Text: text}})
	} else {
		err = d.api.DidChange(ctx, &protocol.DidChangeTextDocumentParams{
			TextDocument:   protocol.VersionedTextDocumentIdentifier{TextDocumentIdentifier: protocol.TextDocumentIdentifier{URI: u}, Version: d.version},
			ContentChanges: []protocol.TextDocumentContentChangeEvent{&protocol.TextDocumentContentChangeWholeDocument{Text: text}},
		})
	}
	if err == nil {
		err = d.api.DidSave(ctx, &protocol.DidSaveTextDocumentParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}})
	}
	if err != nil {
		return 0, err
	}
	for {
		select {
		case got := <-d.published:
			if got == string(u) {
				return time.Since(start), nil
			}
		case <-time.After(30 * time.Second):
			return 0, fmt.Errorf("direct gopls published nothing for %s", path)
		}
	}
}

func (d *direct) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = d.api.Shutdown(ctx)
	_ = d.api.Exit(ctx)
	_ = d.cmd.Process.Kill()
	_ = d.cmd.Wait()
	_ = d.conn.Close()
}

type directClient struct {
	protocol.UnimplementedClient
	d *direct
}

func (c *directClient) PublishDiagnostics(_ context.Context, p *protocol.PublishDiagnosticsParams) error {
	select {
	case c.d.published <- string(p.URI):
	default:
	}
	return nil
}

func (c *directClient) Progress(_ context.Context, p *protocol.ProgressParams) error {
	var v struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(p.Value, &v) != nil {
		return nil
	}
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	tok := fmt.Sprint(p.Token)
	switch v.Kind {
	case "begin":
		c.d.active[tok] = true
	case "end":
		delete(c.d.active, tok)
		if len(c.d.active) == 0 {
			c.d.once.Do(func() { close(c.d.loaded) })
		}
	}
	return nil
}

func (c *directClient) WorkDoneProgressCreate(context.Context, *protocol.WorkDoneProgressCreateParams) error {
	return nil
}

func (c *directClient) Configuration(_ context.Context, p *protocol.ConfigurationParams) ([]protocol.LSPAny, error) {
	out := make([]protocol.LSPAny, len(p.Items))
	for i := range out {
		out[i] = protocol.LSPAny("null")
	}
	return out, nil
}

func (c *directClient) RegisterCapability(context.Context, *protocol.RegistrationParams) error {
	return nil
}
func (c *directClient) LogMessage(context.Context, *protocol.LogMessageParams) error { return nil }
func (c *directClient) ShowMessage(context.Context, *protocol.ShowMessageParams) error {
	return nil
}
