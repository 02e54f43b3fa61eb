package lsp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/internal/boundedio"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// server is one running language server for one root: its process, its
// connection and whether it has loaded the project. What it was told of
// files (docs), what it published about them (diags) and what rendering
// its answers read (cache) keep their own locks. Its connection's read
// goroutine runs the client callbacks, which only record.
type server struct {
	cfg     ServerConfig
	conf    Config
	ready   readiness // how it says it has loaded the project
	root    string    // absolute host path
	workdir string
	ws      *workspace.Root     // the workdir, to resolve the paths the server names (locate)
	encl    enclosure.Enclosure // where it runs: maps paths both ways
	proc    enclosure.Process
	// stdout is the server's stdout as the connection reads it: its
	// header lines and declared lengths are checked against limits before
	// jsonrpc2 buffers them (issue 24 items 1 and 2).
	stdout *boundedio.Framed
	// inflight counts the requests being sent to it (call), so that a
	// reload lets them finish before it closes the server.
	inflight atomic.Int32
	conn     jsonrpc2.Conn
	api      protocol.Server
	caps     protocol.ServerCapabilities
	enc      encoding
	stderr   *ring
	started  time.Time
	exited   chan struct{}    // closed when the process has exited
	metrics  *metrics.Metrics // nil in tests that build a server by hand

	docs   docStore
	diags  diagStore
	cache  fileCache
	writes writeCheck

	loaded     chan struct{} // closed when the project is loaded (ready)
	loadOnce   sync.Once
	crashNoted bool // the supervisor counted its crash; guarded by the supervisor's mu

	mu          sync.Mutex        // guards what follows
	active      map[string]string // progress tokens begun and not ended, with their titles
	sawProgress bool
	closing     bool
}

// stdio joins a process's stdout and stdin into the stream the connection
// reads and writes.
type stdio struct {
	io.Reader
	io.WriteCloser
}

// startServer starts the executable of m in the run's enclosure and
// initializes it. ctx bounds the start; the server lives until close.
func startServer(ctx context.Context, run *orchestrator.Run, conf Config, m match, mt *metrics.Metrics) (*server, error) {
	ws, err := run.Root()
	if err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	s := &server{
		cfg: m.cfg, conf: conf, root: m.root, workdir: run.Workdir, ws: ws, encl: run.Enclosure, metrics: mt,
		stderr: newRing(conf.StderrBytes), exited: exited,
		diags:  diagStore{debounce: conf.Debounce, timeout: conf.DiagnosticsTimeout, stop: exited},
		active: map[string]string{}, loaded: make(chan struct{}),
	}
	s.ready, _ = parseReady(m.cfg.Ready) // validated with the configuration
	dir, err := run.Enclosure.MapPath(m.root)
	if err != nil {
		return nil, err
	}
	s.proc, err = run.Enclosure.Start(ctx, enclosure.Cmd{Path: m.exe, Args: m.cfg.Command[1:], Dir: dir, Stderr: s.stderr})
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w; check that %s runs in the run's enclosure (lsp status)", m.cfg.Name, err, m.exe)
	}
	s.started = time.Now()
	go func() {
		<-s.proc.Done()
		close(s.exited)
	}()
	s.stdout = boundedio.NewFramed(s.proc.Stdout(), boundedio.Limits{Body: conf.MaxMessageBytes})
	stream := jsonrpc2.NewHeaderStream(stdio{s.stdout, s.proc.Stdin()})
	_, s.conn, s.api = protocol.NewClient(context.Background(), &client{s: s}, stream)
	if err := s.initialize(ctx); err != nil {
		s.kill()
		msg := fmt.Sprintf("%s did not initialize in %s: %v", m.cfg.Name, workspace.Rel(run.Workdir, m.root), err)
		if text := s.stderr.excerpt(6, 6); text != "" {
			msg += "\nits stderr:\n" + text
		}
		msg += "\nIt is tried again on the next call (with backoff, up to a cap); fix its installation or the lsp section of the configuration if it keeps failing."
		return nil, errors.New(msg)
	}
	return s, nil
}

// initialize sends initialize and initialized, and reads the
// capabilities and the negotiated position encoding.
func (s *server) initialize(ctx context.Context) error {
	rootURI := s.toURI(s.root)
	// processId asks the server to exit when that process is gone; in a
	// container Berth's pid names no process (or another one), and
	// servers that watch it (vscode-languageserver's: pyright,
	// typescript-language-server) exit within seconds. There it is null,
	// as the spec allows; the relay ends the server with its session.
	var pid any
	if s.encl.Capabilities().SharedPIDs {
		pid = os.Getpid()
	}
	params := map[string]any{
		"processId":             pid,
		"clientInfo":            map[string]any{"name": "berth"},
		"rootUri":               rootURI,
		"rootPath":              s.mapPath(s.root),
		"workspaceFolders":      []protocol.WorkspaceFolder{s.folder()},
		"capabilities":          clientCapabilities,
		"initializationOptions": s.cfg.InitializationOptions,
	}
	var raw jsonrpc2.RawMessage
	call := make(chan error, 1)
	go func() {
		_, err := s.conn.Call(ctx, protocol.MethodInitialize, params, &raw)
		call <- err
	}()
	select {
	case err := <-call:
		if refused := s.refusal(); refused != nil {
			return refused
		}
		if err != nil && s.waitGone(time.Second) {
			return s.exitError()
		}
		if err != nil {
			return err
		}
	case <-s.exited:
		return s.exitError()
	case <-ctx.Done():
		return fmt.Errorf("no answer to initialize within the start timeout (%s): %w", s.conf.StartTimeout, ctx.Err())
	}
	var res protocol.InitializeResult
	if err := protocol.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("reading its capabilities: %w", err)
	}
	s.caps = res.Capabilities
	s.enc, _ = parseEncoding(string(res.Capabilities.PositionEncoding))
	var ext struct {
		OffsetEncoding string `json:"offsetEncoding"`
	}
	if res.Capabilities.PositionEncoding == "" && json.Unmarshal(raw, &ext) == nil {
		// clangd before 15 negotiates through its own offsetEncoding.
		s.enc, _ = parseEncoding(ext.OffsetEncoding)
	}
	if e, ok := parseEncoding(s.cfg.PositionEncoding); ok {
		s.enc = e
	}
	if err := s.api.Initialized(ctx, &protocol.InitializedParams{}); err != nil {
		return err
	}
	if s.cfg.Settings != nil {
		b, err := json.Marshal(s.cfg.Settings)
		if err != nil {
			return fmt.Errorf("settings: %w", err)
		}
		if err := s.api.DidChangeConfiguration(ctx, &protocol.DidChangeConfigurationParams{Settings: b}); err != nil {
			return err
		}
	}
	switch s.ready.kind {
	case readyNone, readyOpenFiles:
		s.markLoaded()
	case readyProgress:
		// A server that reports no progress soon after initialization is
		// taken as loaded; one that does is loaded when all its progress
		// has ended.
		time.AfterFunc(s.conf.ProgressGrace, func() {
			s.mu.Lock()
			quiet := !s.sawProgress
			s.mu.Unlock()
			if quiet {
				s.markLoaded()
			}
		})
	}
	return nil
}

// exitError says how the process ended before it answered initialize.
func (s *server) exitError() error {
	select {
	case <-s.exited:
		code, _ := s.proc.Wait()
		return fmt.Errorf("it exited with code %d before answering initialize", code)
	case <-time.After(time.Second): // its output closed; the exit may lag
		return errors.New("it closed its output before answering initialize")
	}
}

// clientCapabilities is what Berth tells servers it understands.
var clientCapabilities = map[string]any{
	"offsetEncoding": []string{"utf-8", "utf-16"}, // clangd's extension, before positionEncodings
	"general":        map[string]any{"positionEncodings": []string{"utf-8", "utf-32", "utf-16"}},
	"window":         map[string]any{"workDoneProgress": true},
	"workspace": map[string]any{
		"workspaceFolders": true,
		"configuration":    true,
		"workspaceEdit":    map[string]any{"documentChanges": true},
		"symbol":           map[string]any{},
	},
	"textDocument": map[string]any{
		"synchronization":    map[string]any{"didSave": true},
		"publishDiagnostics": map[string]any{"versionSupport": true, "relatedInformation": false},
		"diagnostic":         map[string]any{"relatedDocumentSupport": false},
		"hover":              map[string]any{"contentFormat": []string{"markdown", "plaintext"}},
		"definition":         map[string]any{"linkSupport": true},
		"typeDefinition":     map[string]any{"linkSupport": true},
		"implementation":     map[string]any{"linkSupport": true},
		"references":         map[string]any{},
		"documentSymbol":     map[string]any{"hierarchicalDocumentSymbolSupport": true},
		"rename":             map[string]any{"prepareSupport": true},
		"codeAction": map[string]any{"codeActionLiteralSupport": map[string]any{"codeActionKind": map[string]any{
			"valueSet": []string{"", "quickfix", "refactor", "refactor.extract", "refactor.inline", "refactor.rewrite", "source", "source.organizeImports", "source.fixAll"},
		}}},
	},
}

// ClientCapabilities returns, as JSON, the capabilities Berth declares
// in initialize: a benchmark's direct client sends the same, so both
// servers do the same work for a request.
func ClientCapabilities() json.RawMessage {
	b, err := json.Marshal(clientCapabilities)
	if err != nil {
		panic(fmt.Sprintf("lsp: client capabilities: %v", err))
	}
	return b
}

// folder is the server's one workspace folder, its root.
func (s *server) folder() protocol.WorkspaceFolder {
	return protocol.WorkspaceFolder{URI: s.toURI(s.root), Name: filepath.Base(s.root)}
}

// mapPath turns a host path into the path the server sees
// (Enclosure.MapPath). The files Berth names are inside the workdir, which
// the enclosure always sees; a path it cannot map is sent as it is, and
// the server then says it does not know the file.
func (s *server) mapPath(abs string) string {
	if p, err := s.encl.MapPath(abs); err == nil {
		return p
	}
	return abs
}

func (s *server) toURI(abs string) uri.URI { return uri.File(s.mapPath(abs)) }

// fromURI turns a URI from the server into a host path
// (Enclosure.HostPath). ok is false for a path the host does not share
// with the enclosure (a container's own standard library): it is
// returned as the server named it, and is never treated as inside the
// workdir, whatever it looks like lexically.
func (s *server) fromURI(u uri.URI) (p string, ok bool) {
	p = filepath.Clean(filepath.FromSlash(u.Path()))
	hp, err := s.encl.HostPath(p)
	if err != nil {
		return p, false
	}
	return hp, true
}

// locate turns a URI the server named into the file it is on disk
// (pathOf, then resolve: symlinks resolved at every component as
// ast_edit resolves the paths a model gives, workspace.Root). inside is
// false when that file lies outside the workdir, cannot be resolved, or
// is a path only the enclosure has: such a path is never shown, read or
// written, whatever it looks like lexically. A server that loads a folder
// through a symlink in the workdir names its files by the link. resolve
// is the workspace's Resolve, or a query's Resolver that remembers what
// it looked at.
func (s *server) locate(u uri.URI, resolve func(string) (string, error)) (path string, inside bool) {
	p, shared := s.pathOf(u)
	if !shared {
		return p, false
	}
	real, err := resolve(p)
	if err != nil {
		return p, false
	}
	return real, true
}

// readFile reads a regular file inside the workdir through the
// workspace root, which refuses a path that leads out of it (also when a
// link changed since the path was resolved) and never waits on a FIFO.
func (s *server) readFile(abs string) ([]byte, error) {
	b, _, err := s.ws.ReadRegular(abs, -1)
	return b, err
}

// published records a publish, keyed like the files the model names.
func (s *server) published(u uri.URI, version int32, items []protocol.Diagnostic) {
	abs, inside := s.locate(u, s.ws.Resolve)
	s.diags.publish(abs, version, items, !inside)
}

// progressed records a progress token's begin (with its title) or end.
// The project is loaded, for "progress", when all begun tokens have
// ended; for "progress:TITLE", when the token begun with that title has.
func (s *server) progressed(token, kind, title string) {
	s.mu.Lock()
	var done bool
	switch kind {
	case "begin":
		s.sawProgress = true
		s.active[token] = title
	case "end":
		began, ok := s.active[token]
		delete(s.active, token)
		done = ok && s.ready.kind == readyTitle && strings.HasPrefix(began, s.ready.title)
	}
	if s.ready.kind == readyProgress {
		done = s.sawProgress && len(s.active) == 0
	}
	s.mu.Unlock()
	if done {
		s.markLoaded()
	}
}

// logged marks the project loaded when the line the entry's "log:" waits
// for comes.
func (s *server) logged(line string) {
	if s.ready.kind == readyLog && s.ready.log.MatchString(line) {
		s.markLoaded()
	}
}

func (s *server) markLoaded() { s.loadOnce.Do(func() { close(s.loaded) }) }

// waitLoaded waits until the server has loaded the project (its entry's
// Ready signal), up to the load timeout; it says whether it has.
// abs is the file the query is about ("" for none).
func (s *server) waitLoaded(ctx context.Context, abs string) bool {
	ctx, cancel := context.WithTimeout(ctx, s.conf.LoadTimeout)
	defer cancel()
	if s.ready.kind == readyTsserver {
		return s.tsserverLoaded(ctx, abs)
	}
	select {
	case <-s.loaded:
		return true
	case <-ctx.Done():
	case <-s.exited:
	}
	return false
}

// tsserverLoaded asks tsserver about the project of abs, the file of
// the query (else the file synced last, else a file of the root, opened
// first: tsserver loads a project only for an open file). tsserver
// answers in order, so its answer comes after the load.
func (s *server) tsserverLoaded(ctx context.Context, abs string) bool {
	if abs == "" {
		abs = s.docs.lastSynced()
	}
	if abs == "" {
		if abs = firstFile(s.root, s.cfg.Extensions); abs == "" {
			s.markLoaded() // no file of its languages: nothing to load
			return true
		}
		if _, err := s.sync(ctx, abs, false); err != nil {
			return false
		}
	}
	arg, err := json.Marshal(map[string]any{"file": s.mapPath(abs), "needFileNameList": false})
	if err != nil {
		return false
	}
	name, _ := json.Marshal("projectInfo")
	err = s.call(ctx, protocol.MethodWorkspaceExecuteCommand, func(ctx context.Context) error {
		_, err := s.api.ExecuteCommand(ctx, &protocol.ExecuteCommandParams{Command: "typescript.tsserverRequest", Arguments: []protocol.LSPAny{name, arg}})
		return err
	})
	if err != nil {
		return false
	}
	s.markLoaded()
	return true
}

// loadNote waits for the load (waitLoaded) before a workspace-wide
// query about abs ("" for none), and returns what its answer must say
// in its first line about being complete: "" when it is as complete as
// the server can make it.
func (s *server) loadNote(ctx context.Context, abs string) string {
	if s.ready.kind == readyOpenFiles {
		return fmt.Sprintf("may be incomplete: %s knows only the files opened so far, so uses in other files can be missing", s.cfg.Name)
	}
	if !s.waitLoaded(ctx, abs) {
		return fmt.Sprintf("%s had not finished loading the workspace; the list may be incomplete (waited up to lsp.load_timeout, %s)", s.cfg.Name, s.conf.LoadTimeout)
	}
	return ""
}

// alive says whether the server can still answer: its process runs and
// its connection is open.
func (s *server) alive() bool {
	select {
	case <-s.exited:
		return false
	case <-s.conn.Done():
		return false
	default:
		return true
	}
}

// waitGone waits up to d for the process to exit or the connection to
// end, and says whether it did.
func (s *server) waitGone(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.exited:
	case <-s.conn.Done():
	case <-t.C:
		return false
	}
	return true
}

// call runs one request with the request timeout, retrying when the
// server answers that the content changed under it or that it cancelled
// the request itself.
func (s *server) call(ctx context.Context, method string, f func(ctx context.Context) error) error {
	s.inflight.Add(1)
	defer s.inflight.Add(-1)
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, s.conf.RequestTimeout)
		start := time.Now()
		err := f(cctx)
		if s.metrics != nil {
			s.metrics.LSPRequestDuration.WithLabelValues(s.cfg.Name, method).Observe(time.Since(start).Seconds())
		}
		cancel()
		if err == nil || attempt == 4 || !retryable(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
		case <-ctx.Done():
			return err
		}
	}
}

// request runs f through call; when the server died under it, the error
// wraps errExited and says that the next call gets a restarted server.
func (s *server) request(ctx context.Context, method string, f func(ctx context.Context) error) error {
	err := s.call(ctx, method, f)
	var answered *jsonrpc2.Error
	if err == nil || ctx.Err() != nil || errors.As(err, &answered) {
		return err
	}
	if refused := s.refusal(); refused != nil {
		return refused
	}
	return s.markExited(err)
}

// refusal says why Berth stopped reading the server, when what it sent
// broke a limit (a header line or block without end, a message over
// lsp.max_message_bytes): its connection has ended and the server is
// killed with it. The error names the server, what it sent and what to
// do. nil while its stream is within the limits.
func (s *server) refusal() error {
	err := s.stdout.Err()
	if err == nil {
		return nil
	}
	next := "a language server's header is a line or two: if it does this again, it is broken, or something other than the server writes to its stdout (check its command in lsp.servers)"
	if errors.Is(err, boundedio.ErrBody) {
		next = "if its answers really are this large, raise lsp.max_message_bytes"
	}
	return fmt.Errorf("%s sent %v, so Berth stopped reading it and ended it; it is restarted on the next call; %s", s.cfg.Name, err, next)
}

// markExited wraps a transport error in errExited when the server's process
// is gone (its exit lags the EOF by a moment); other errors pass as they
// are.
func (s *server) markExited(err error) error {
	if !s.waitGone(time.Second) {
		return err
	}
	return fmt.Errorf("%w; %s %w; it is restarted on the next call: call again (lsp status shows its stderr)", err, s.cfg.Name, errExited)
}

// advice says what to do after a request failed: a refusal by the server
// usually means the position names no symbol it knows; a crash or a
// timeout already says what to do.
func advice(err error) string {
	var answered *jsonrpc2.Error
	if errors.As(err, &answered) {
		return " (check that line and symbol name the identifier you mean; lsp status shows the server's state)"
	}
	return ""
}

// errExited marks a request whose server exited under it. Read-only
// queries are asked once more of the restarted server (see retried).
var errExited = errors.New("exited during the request")

// retryable says whether the server asked for the request to be sent
// again: ContentModified or ServerCancelled.
func retryable(err error) bool {
	var e *jsonrpc2.Error
	if !errors.As(err, &e) {
		return false
	}
	return e.Code == protocol.CodeContentModified || e.Code == codeServerCancelled
}

// codeServerCancelled is LSP's ServerCancelled (-32802): the server gave
// up on the request and the client may retry it.
const codeServerCancelled jsonrpc2.Code = -32802

// close ends the server: shutdown and exit when it still answers, then,
// after the grace, a kill of its process group (enclosure.StopFunc).
func (s *server) close() {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return
	}
	s.closing = true
	s.mu.Unlock()
	grace := time.Duration(0) // a server that does not answer is killed at once
	if s.alive() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if s.api.Shutdown(ctx) == nil && s.api.Exit(ctx) == nil {
			grace = closeGrace
		}
		cancel()
	}
	enclosure.StopFunc(s.proc, nil, grace)
	<-s.exited
	_ = s.conn.Close()
}

// drain waits, up to d, until no request is being sent to the server: a
// reload closes the old server only then, so that a query already on
// its way is answered rather than cut off.
func (s *server) drain(d time.Duration) {
	deadline := time.Now().Add(d)
	for s.inflight.Load() > 0 && time.Now().Before(deadline) && s.alive() {
		time.Sleep(5 * time.Millisecond)
	}
}

// closeGrace is how long a server that was told to exit has to do so
// before it is killed.
const closeGrace = time.Second

// kill kills the process and waits for the connection to end.
func (s *server) kill() {
	_ = s.proc.Kill()
	<-s.exited
	_ = s.conn.Close()
}

// isClosing says whether the server is being closed on purpose.
func (s *server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}
