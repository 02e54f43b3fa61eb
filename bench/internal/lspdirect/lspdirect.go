// Package lspdirect is a minimal LSP client of one language server the
// benchmarks start themselves, on the host or through any command that
// carries its stdio (docker exec -i): the alternative a user would write,
// with nothing Berth does around the request, to time Berth against.
package lspdirect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/orchestrator/lsp"
)

// Client is a minimal LSP client of its own server.
type Client struct {
	kill    func()            // ends the server Start started; nil for StartConn
	root    string            // the module root as the server sees it
	local   string            // the same directory here
	langs   map[string]string // language ids by file extension (its catalog entry's)
	entry   lsp.ServerConfig  // its catalog entry: what it is asked, what its client answers
	opened  map[string]bool
	conn    jsonrpc2.Conn
	api     protocol.Server
	version int32

	mu        sync.Mutex
	published chan string // uris, as gopls publishes them
	loaded    chan struct{}
	readyLog  *regexp.Regexp // the log line that says it has loaded, for a log: entry
	active    map[string]bool
	once      sync.Once
}

type pipes struct {
	io.Reader
	io.WriteCloser
}

// Start runs argv (gopls, or a command that runs it elsewhere, such as
// docker exec -i ID gopls) and initializes it on root, the module as the
// server sees it; local is the same directory here, where the files it
// opens are read. The server gets Berth's client capabilities and its
// catalog's initialization options: the same work Berth asks of it.
func Start(ctx context.Context, root, local string, argv ...string) (*Client, error) {
	if len(argv) == 0 {
		return nil, errors.New("lspdirect.Start: no command: give the server's argv, such as gopls")
	}
	return StartServer(ctx, "gopls", root, local, argv...)
}

// StartServer is Start for the catalog entry named server (lsp's
// DefaultServers: gopls, pyright, typescript-language-server, ...),
// run by argv, else by the entry's own command, on the host.
func StartServer(ctx context.Context, server, root, local string, argv ...string) (*Client, error) {
	entry, ok := catalogEntry(server)
	if !ok {
		var names []string
		for _, s := range lsp.DefaultServers() {
			names = append(names, s.Name)
		}
		return nil, fmt.Errorf("lspdirect: no server %q in Berth's catalog: name one of %s", server, strings.Join(names, ", "))
	}
	if len(argv) == 0 {
		argv = entry.Command
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = local
	// What the server (or docker exec, for a container gone) says goes
	// into the error of a start that fails.
	stderr := enclosure.NewTail(4096)
	cmd.Stderr = stderr
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
	d, err := start(ctx, entry, root, local, pipes{stdout, stdin}, func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w (its stderr: %q)", strings.Join(argv, " "), err, stderr.String())
	}
	return d, nil
}

// StartConn initializes a gopls that is already running at the far end
// of conn (a socket its stdio is attached to), as Start does; closing the
// client closes conn.
func StartConn(ctx context.Context, root, local string, conn io.ReadWriteCloser) (*Client, error) {
	entry, _ := catalogEntry("gopls")
	return start(ctx, entry, root, local, conn, nil)
}

// catalogEntry is the entry of Berth's catalog named name.
func catalogEntry(name string) (lsp.ServerConfig, bool) {
	for _, s := range lsp.DefaultServers() {
		if s.Name == name {
			return s, true
		}
	}
	return lsp.ServerConfig{}, false
}

func start(ctx context.Context, entry lsp.ServerConfig, root, local string, stream io.ReadWriteCloser, kill func()) (*Client, error) {
	d := &Client{kill: kill, root: root, local: local, langs: entry.Extensions, entry: entry, opened: map[string]bool{}, published: make(chan string, 1024), loaded: make(chan struct{}), active: map[string]bool{}}
	switch {
	case strings.HasPrefix(entry.Ready, "log:"):
		// Loaded when it logs the line (pyright: until then it searches
		// only the open files), as Berth waits for it.
		re, err := regexp.Compile(strings.TrimPrefix(entry.Ready, "log:"))
		if err != nil {
			return nil, fmt.Errorf("the catalog entry %s: ready: %w", entry.Name, err)
		}
		d.readyLog = re
	case !strings.HasPrefix(entry.Ready, "progress"):
		// Its load shows nothing to wait for: its first answer comes
		// after the load (tsserver answers in order).
		d.once.Do(func() { close(d.loaded) })
	}
	d.conn, d.api = lsp.Connect(&client{d: d}, jsonrpc2.NewHeaderStream(stream)) // as Berth connects
	var pid any = os.Getpid()
	if root != local {
		pid = nil // as Berth sends it to a server in a container: its pid means nothing there
	}
	params := map[string]any{
		"processId": pid, "rootUri": uri.File(root), "rootPath": root, "clientInfo": map[string]any{"name": "bench-direct"},
		"workspaceFolders":      []protocol.WorkspaceFolder{{URI: uri.File(root), Name: filepath.Base(root)}},
		"capabilities":          lsp.ClientCapabilities(),    // as Berth declares them: the same work
		"initializationOptions": entry.InitializationOptions, // as Berth's catalog entry
	}
	var raw jsonrpc2.RawMessage
	_, err := d.conn.Call(ctx, protocol.MethodInitialize, params, &raw)
	if err == nil {
		err = d.api.Initialized(ctx, &protocol.InitializedParams{})
	}
	if err != nil {
		d.end()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	return d, nil
}

// open sends didOpen once per file; path is as the server sees it.
func (d *Client) open(ctx context.Context, path string) error {
	rel, err := filepath.Rel(d.root, path)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(d.local, rel))
	if err != nil {
		return err
	}
	return d.api.DidOpen(ctx, &protocol.DidOpenTextDocumentParams{TextDocument: protocol.TextDocumentItem{
		URI: uri.File(path), LanguageID: d.lang(path), Version: 1, Text: string(b)}})
}

// lang is the language id of path, by its extension.
func (d *Client) lang(path string) protocol.LanguageKind {
	return protocol.LanguageKind(d.langs[strings.ToLower(filepath.Ext(path))])
}

// Request sends one definition or references request at path (as the
// server sees it), line and col (0-based), and times it.
func (d *Client) Request(ctx context.Context, action, path string, line, col int) (time.Duration, error) {
	if !d.opened[path] {
		d.opened[path] = true
		if err := d.open(ctx, path); err != nil {
			return 0, err
		}
		select { // as Berth does, references wait for the initial load
		case <-d.loaded:
		case <-time.After(2 * time.Minute):
		case <-ctx.Done():
			return 0, ctx.Err()
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
	default:
		return 0, fmt.Errorf("action %q: the client sends definition or references", action)
	}
	return time.Since(start), err
}

// Write sends the new content of path and times it to the server's first
// publish for the file.
func (d *Client) Write(ctx context.Context, path, text string) (time.Duration, error) {
	u := uri.File(path)
	d.version++
	for len(d.published) > 0 {
		<-d.published
	}
	start := time.Now()
	var err error
	if d.version == 1 {
		err = d.api.DidOpen(ctx, &protocol.DidOpenTextDocumentParams{TextDocument: protocol.TextDocumentItem{URI: u, LanguageID: d.lang(path), Version: 1, Text: text}})
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
			return 0, fmt.Errorf("direct server published nothing for %s", path)
		}
	}
}

// Close ends the server.
func (d *Client) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = d.api.Shutdown(ctx)
	_ = d.api.Exit(ctx)
	d.end()
}

// end kills the command and closes the connection. Through docker exec,
// that ends the CLI; a server inside that ignored exit lives until its
// container goes, which bench/enclosure removes at its end.
func (d *Client) end() {
	if d.kill != nil {
		d.kill()
	}
	_ = d.conn.Close()
}

// client answers what the server asks of its client.
type client struct {
	protocol.UnimplementedClient
	d *Client
}

func (c *client) PublishDiagnostics(_ context.Context, p *protocol.PublishDiagnosticsParams) error {
	select {
	case c.d.published <- string(p.URI):
	default:
	}
	return nil
}

func (c *client) Progress(_ context.Context, p *protocol.ProgressParams) error {
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

func (c *client) WorkDoneProgressCreate(context.Context, *protocol.WorkDoneProgressCreateParams) error {
	return nil
}

func (c *client) Configuration(_ context.Context, p *protocol.ConfigurationParams) ([]protocol.LSPAny, error) {
	return lsp.ConfigurationAnswer(c.d.entry.Settings, p.Items), nil // as Berth answers
}

func (c *client) RegisterCapability(context.Context, *protocol.RegistrationParams) error {
	return nil
}
func (c *client) LogMessage(_ context.Context, p *protocol.LogMessageParams) error {
	if c.d.readyLog != nil && c.d.readyLog.MatchString(p.Message) {
		c.d.once.Do(func() { close(c.d.loaded) })
	}
	return nil
}
func (c *client) ShowMessage(context.Context, *protocol.ShowMessageParams) error {
	return nil
}
