package lsp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// server is one running language server for one root, composed of its
// jobs: its process and connection (proc), whether it has loaded the
// project (load), its paths across the enclosure's boundary (paths) and
// how it departs from the protocol (quirks). What it was told of files
// (docs), what it published about them (diags) and what rendering its
// answers read (cache) keep their own locks. Its own methods are what
// needs several of them: initializing it, keeping its view of the files
// in step with the disk, and reading its diagnostics.
type server struct {
	cfg    ServerConfig
	conf   Config
	proc   *process   // nil until started
	load   *loadState // nil in tests that build a server by hand
	paths  pathMap
	quirks quirks
	caps   protocol.ServerCapabilities
	enc    encoding

	docs   docStore
	diags  diagStore
	cache  fileCache
	writes writeCheck

	// takenBack: a Berth before this one started it (Provider.Take).
	takenBack bool
	// initResult is its answer to initialize, as it sent it.
	initResult json.RawMessage
	// keep writes its record in the state directory; nil when it is not
	// kept (keep.go).
	keep atomic.Pointer[keeper]

	// complained: the server said it is in error (window/showMessage of
	// type Error: gopls that cannot load the workspace, a server that
	// rejects its settings), so it is never parked for another run.
	complained atomic.Bool
	// pullWarned: a failure of its pull_diagnostics was logged.
	pullWarned atomic.Bool
}

// parkable says whether the server may be parked for another run: it
// runs, is not being closed, never broke the message limits and never
// said it is in error. (A crash or a reload is the slot's to know.)
func (s *server) parkable() bool {
	return s.proc.alive() && !s.proc.isClosing() && s.proc.refusal() == nil && !s.complained.Load()
}

// startServer starts the executable of m in the run's enclosure and
// initializes it. ctx bounds the start; the server lives until its
// process is closed.
func startServer(ctx context.Context, run *orchestrator.Run, conf Config, m match, mt *metrics.Metrics) (*server, error) {
	ws, err := run.Root()
	if err != nil {
		return nil, err
	}
	s := newServer(m.cfg, conf, mt, m.root, run.Workdir, run.Enclosure)
	proc := s.proc
	s.paths.bind(ws)
	dir, err := run.Enclosure.MapPath(m.root)
	if err != nil {
		return nil, err
	}
	// Kept: its relay holds it when Berth goes away without stopping it,
	// for a Berth on the same state directory to park (keep.go).
	cmd := enclosure.Cmd{Path: m.exe, Args: m.cfg.Command[1:], Dir: dir, Keep: &enclosure.Keep{Kind: metrics.KindLSP, Role: m.cfg.Name}}
	if err := proc.start(ctx, run.Enclosure, cmd, &client{s: s}); err != nil {
		return nil, fmt.Errorf("starting %s: %w; check that %s runs in the run's enclosure (lsp status)", m.cfg.Name, err, m.exe)
	}
	if err := s.initialize(ctx); err != nil {
		s.proc.kill()
		msg := fmt.Sprintf("%s did not initialize in %s: %v", m.cfg.Name, workspace.Rel(run.Workdir, m.root), err)
		if text := s.proc.stderr.excerpt(6, 6); text != "" {
			msg += "\nits stderr:\n" + text
		}
		msg += "\nIt is tried again on the next call (with backoff, up to a cap); fix its installation or the lsp section of the configuration if it keeps failing."
		return nil, errors.New(msg)
	}
	s.startKeeping(run.Enclosure, keyOf(run, m), 0)
	return s, nil
}

// newServer is a server of the entry cfg for root in workdir, in the
// enclosure encl, before its process starts (or is taken back after a
// restart).
func newServer(cfg ServerConfig, conf Config, mt *metrics.Metrics, root, workdir string, encl enclosure.Enclosure) *server {
	signal, _ := parseReady(cfg.Ready) // validated with the configuration
	proc := newProcess(cfg.Name, conf, mt)
	return &server{
		cfg: cfg, conf: conf, proc: proc, load: newLoadState(signal, conf.ProgressGrace), quirks: quirksFor(cfg, signal),
		paths: pathMap{root: root, workdir: workdir, encl: encl},
		diags: diagStore{debounce: conf.Debounce, timeout: conf.DiagnosticsTimeout, stop: proc.exited},
	}
}

// initialize sends initialize and initialized, and reads the
// capabilities and the negotiated position encoding.
func (s *server) initialize(ctx context.Context) error {
	rootURI := s.paths.toURI(s.paths.root)
	// processId asks the server to exit when that process is gone; in a
	// container Berth's pid names no process (or another one), and
	// servers that watch it (vscode-languageserver's: pyright,
	// typescript-language-server) exit within seconds. There it is null,
	// as the spec allows; the relay ends the server with its session.
	var pid any
	if s.paths.encl.Capabilities().SharedPIDs {
		pid = os.Getpid()
	}
	params := map[string]any{
		"processId":             pid,
		"clientInfo":            map[string]any{"name": "berth"},
		"rootUri":               rootURI,
		"rootPath":              s.paths.mapPath(s.paths.root),
		"workspaceFolders":      []protocol.WorkspaceFolder{s.paths.folder()},
		"capabilities":          clientCapabilities,
		"initializationOptions": s.cfg.InitializationOptions,
	}
	var raw jsonrpc2.RawMessage
	call := make(chan error, 1)
	go func() {
		_, err := s.proc.conn.Call(ctx, protocol.MethodInitialize, params, &raw)
		call <- err
	}()
	select {
	case err := <-call:
		if refused := s.proc.refusal(); refused != nil {
			return refused
		}
		if err != nil && s.proc.waitGone(time.Second) {
			return s.proc.exitError()
		}
		if err != nil {
			return err
		}
	case <-s.proc.exited:
		return s.proc.exitError()
	case <-ctx.Done():
		return fmt.Errorf("no answer to initialize within the start timeout (%s): %w", s.conf.StartTimeout, ctx.Err())
	}
	if err := s.readInitResult(raw); err != nil {
		return err
	}
	if err := s.proc.api.Initialized(ctx, &protocol.InitializedParams{}); err != nil {
		return err
	}
	if s.cfg.Settings != nil {
		b, err := json.Marshal(s.cfg.Settings)
		if err != nil {
			return fmt.Errorf("settings: %w", err)
		}
		if err := s.proc.api.DidChangeConfiguration(ctx, &protocol.DidChangeConfigurationParams{Settings: b}); err != nil {
			return err
		}
	}
	s.load.initialized()
	return nil
}

// readInitResult reads the server's answer to initialize: its
// capabilities and the negotiated position encoding. A server taken back
// after a restart reads the one its record kept.
func (s *server) readInitResult(raw []byte) error {
	var res protocol.InitializeResult
	if err := protocol.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("reading its capabilities: %w", err)
	}
	s.initResult = raw
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
	return nil
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

// waitLoaded waits until the server has loaded the project (its entry's
// Ready signal, or its quirks' probe), up to the load timeout; it says
// whether it has. abs is the file the query is about ("" for none).
func (s *server) waitLoaded(ctx context.Context, abs string) bool {
	ctx, cancel := context.WithTimeout(ctx, s.conf.LoadTimeout)
	defer cancel()
	if s.quirks.probeLoad != nil {
		return s.quirks.probeLoad(ctx, s, abs)
	}
	return s.load.wait(ctx, s.proc.exited)
}

// loadNote waits for the load (waitLoaded) before a workspace-wide
// query about abs ("" for none), and returns what its answer must say
// in its first line about being complete: "" when it is as complete as
// the server can make it.
func (s *server) loadNote(ctx context.Context, abs string) string {
	if s.quirks.index != nil {
		return fmt.Sprintf("may be incomplete: %s knows only the files opened so far, so uses in other files can be missing", s.cfg.Name)
	}
	if !s.waitLoaded(ctx, abs) {
		return fmt.Sprintf("%s had not finished loading the workspace; the list may be incomplete (waited up to lsp.load_timeout, %s)", s.cfg.Name, s.conf.LoadTimeout)
	}
	return ""
}

// sync tells the server the file's current content on disk: didOpen the
// first time, didChange with a new version when it changed, and didSave
// when save is set. It returns the document as sent.
func (s *server) sync(ctx context.Context, abs string, save bool) (document, error) {
	s.docs.order.Lock()
	defer s.docs.order.Unlock()
	return s.syncLocked(ctx, abs, save)
}

// syncLocked is sync, called with docs.order.
func (s *server) syncLocked(ctx context.Context, abs string, save bool) (document, error) {
	if s.docs.warming == abs {
		s.docs.warming = "" // the caller's now: the warm-up leaves it open
	}
	u := s.paths.toURI(abs)
	st, err := os.Stat(abs)
	if errors.Is(err, os.ErrNotExist) {
		return document{}, s.gone(ctx, abs)
	}
	if err != nil {
		return document{}, fmt.Errorf("reading %s: %w", s.paths.rel(abs), err)
	}
	if !save {
		if d, ok := s.docs.unchanged(abs, st.Size(), st.ModTime()); ok {
			return d, nil // unchanged since it was read: no need to read it again
		}
	}
	b, err := s.paths.readFile(abs)
	if errors.Is(err, os.ErrNotExist) { // deleted since the stat
		return document{}, s.gone(ctx, abs)
	}
	if err != nil {
		return document{}, fmt.Errorf("reading %s: %w", s.paths.rel(abs), err)
	}
	text := string(b)
	// The counter is read before the notification goes out, so only a
	// publish counted after it can answer this version.
	cp, opened, changed := s.docs.update(abs, text, st.Size(), st.ModTime(), s.diags.count())
	switch {
	case opened:
		// Recorded before the server hears of it.
		if err := s.keep.Load().opened(s); err != nil {
			s.docs.forget(abs)
			return document{}, err
		}
		lang := s.cfg.Extensions[strings.ToLower(filepath.Ext(abs))]
		err = s.proc.api.DidOpen(ctx, &protocol.DidOpenTextDocumentParams{TextDocument: protocol.TextDocumentItem{
			URI: u, LanguageID: protocol.LanguageKind(lang), Version: cp.version, Text: text}})
		if err != nil {
			s.docs.forget(abs) // not heard: the next sync opens it again
		}
	case changed:
		err = s.proc.api.DidChange(ctx, &protocol.DidChangeTextDocumentParams{
			TextDocument:   protocol.VersionedTextDocumentIdentifier{TextDocumentIdentifier: protocol.TextDocumentIdentifier{URI: u}, Version: cp.version},
			ContentChanges: []protocol.TextDocumentContentChangeEvent{&protocol.TextDocumentContentChangeWholeDocument{Text: text}},
		})
	}
	if err == nil && save {
		err = s.proc.api.DidSave(ctx, &protocol.DidSaveTextDocumentParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}})
	}
	return cp, err
}

// gone forgets a deleted file, tells the server it is closed if it was
// open, and returns errGone.
func (s *server) gone(ctx context.Context, abs string) error {
	s.diags.forget(abs)
	_ = s.closeLocked(ctx, abs)
	return fmt.Errorf("%s: %w", s.paths.rel(abs), errGone)
}

// syncOpen re-syncs every open document whose file changed on disk since
// it was sent (the harness may have written it without files/didWrite),
// so a query never runs against a stale view of the workspace.
func (s *server) syncOpen(ctx context.Context, except string) error {
	for _, abs := range s.docs.paths(except) {
		if _, err := s.sync(ctx, abs, false); err != nil && !errors.Is(err, errGone) {
			return err
		}
	}
	return nil
}

// syncFor prepares a query about abs: every other open document that
// changed on disk is synced again, then abs itself (a stat each). When the
// server exited meanwhile the error wraps errExited.
func (s *server) syncFor(ctx context.Context, abs string) (document, error) {
	err := s.syncOpen(ctx, abs)
	var doc document
	if err == nil {
		doc, err = s.sync(ctx, abs, false)
	}
	if err == nil {
		s.docs.touch(abs)
	}
	if err != nil && !errors.Is(err, errGone) {
		err = s.proc.markExited(err)
	}
	return doc, err
}

// linesOf returns the text of a file for converting positions in it: as
// the server was sent it when open, else as on disk (another file the
// server reported on).
func (s *server) linesOf(abs string) string {
	if text, open := s.docs.text(abs); open {
		return text
	}
	return strings.Join(s.cache.fileLines(abs, time.Time{}, s.paths.readFile), "\n")
}

// diagnose returns the diagnostics of the synced version doc of abs
// (diagnoseDocs): ok is false when no answer for that version came in
// time, or the server died: silence is never taken as clean.
func (s *server) diagnose(ctx context.Context, abs string, doc document) (items []protocol.Diagnostic, ok bool) {
	got, _, _ := s.diagnoseDocs(ctx, map[string]document{abs: doc}, nil)
	items, ok = got[abs]
	return items, ok
}

// diagnoseDocs returns the diagnostics of each document of docs, as
// synced; one with none in time is left out. A server that can diagnose
// everything at once (quirks.diagnoseAll: gopls) is asked once, for docs
// and for deleted files (a deletion publishes nothing of its own), and
// answered says it answered: every publish of the pass is recorded then.
// Else each file is asked its server's own way (quirks.pull: tsserver),
// else by the protocol (diagnoseByProtocol); a failure of either of the
// server's own ways is logged once, with the fix, and its publishes are
// waited for instead. pullErr is why the server could not be asked to
// diagnose everything, when it could not: problems a write caused in
// other files may then be missing. It is nil when the call ended with
// ctx or with the server, which the per-file results then say. The files
// are not asked again one by one then (a failure, or a timeout, each).
func (s *server) diagnoseDocs(ctx context.Context, docs map[string]document, deleted []string) (got map[string][]protocol.Diagnostic, answered bool, pullErr error) {
	failed := func(err error) error {
		if ctx.Err() != nil || !s.proc.alive() {
			return nil // the call ended with its caller, or the server
		}
		s.pullFailed(err)
		return err
	}
	if s.quirks.diagnoseAll != nil && len(docs)+len(deleted) > 0 {
		err := s.quirks.diagnoseAll(ctx, s, append(slices.Sorted(maps.Keys(docs)), deleted...))
		answered = err == nil
		if err != nil {
			pullErr = failed(err)
		}
	}
	got = map[string][]protocol.Diagnostic{}
	for abs, doc := range docs {
		var items []protocol.Diagnostic
		ok := true
		switch {
		case answered:
			items = s.diags.latest(abs)
		case s.quirks.pull != nil:
			var err error
			if items, err = s.quirks.pull(ctx, s, abs); err != nil {
				_ = failed(err)
				items, ok = s.diagnoseByProtocol(ctx, abs, doc)
			}
		default:
			items, ok = s.diagnoseByProtocol(ctx, abs, doc)
		}
		if ok {
			got[abs] = items
		}
	}
	return got, answered, pullErr
}

// diagnoseByProtocol is diagnose without the quirks' pull: pulled by
// textDocument/diagnostic where offered, else the publish.
func (s *server) diagnoseByProtocol(ctx context.Context, abs string, doc document) (items []protocol.Diagnostic, ok bool) {
	if s.caps.DiagnosticProvider != nil {
		var rep protocol.DocumentDiagnosticReport
		err := s.proc.call(ctx, protocol.MethodTextDocumentDiagnostic, func(ctx context.Context) error {
			var err error
			rep, err = s.proc.api.Diagnostic(ctx, &protocol.DocumentDiagnosticParams{TextDocument: protocol.TextDocumentIdentifier{URI: s.paths.toURI(abs)}})
			return err
		})
		if full, isFull := rep.(*protocol.RelatedFullDocumentDiagnosticReport); err == nil && isFull {
			return full.Items, true
		}
	}
	return s.diags.wait(ctx, abs, doc.syncSeq, doc.version)
}

// pullFailed logs, once per server, that its diagnostics could not be
// asked for its own way (pull_diagnostics), and what to do. Berth then
// waits for its publishes, which can miss a second pass (gopls's, 1 s
// after a change): a write's report says so each time.
func (s *server) pullFailed(err error) {
	if s.pullWarned.CompareAndSwap(false, true) {
		slog.Warn("lsp: a language server could not be asked for its diagnostics its own way, so writes are checked by waiting for what it publishes, which can miss what a write broke in other files",
			"server", s.cfg.Name, "pull_diagnostics", s.cfg.PullDiagnostics, "err", err,
			"fix", "use a server version that has it (gopls: gopls.diagnose_files), or set this entry's pull_diagnostics to \"\" (for gopls, also initialization_options.diagnosticsDelay: 0s)")
	}
}

// pulls says whether diagnose asks for diagnostics rather than waiting
// for a publish.
func (s *server) pulls() bool {
	return s.caps.DiagnosticProvider != nil || s.quirks.pull != nil || s.quirks.diagnoseAll != nil
}

// convert turns a server's diagnostics for abs into diags, with columns
// counted in characters of the file's text.
func (s *server) convert(abs string, items []protocol.Diagnostic, text string) []diag {
	out := make([]diag, 0, len(items))
	for _, it := range items {
		line := int(it.Range.Start.Line) + 1
		col := 1
		if lt, _, err := lineAt(text, line); err == nil {
			col = utf8.RuneCountInString(lt[:s.enc.fromServer(lt, it.Range.Start.Character)]) + 1
		}
		d := diag{rel: s.paths.rel(abs), line: line, col: col, severity: it.Severity, message: messageText(it.Message)}
		if d.severity == 0 {
			d.severity = protocol.DiagnosticSeverityError
		}
		if it.Code != nil {
			d.code = fmt.Sprint(it.Code)
		}
		if src, ok := it.Source.Get(); ok {
			d.source = src
		}
		out = append(out, d)
	}
	sortDiags(out)
	return out
}

// nameAt is the identifier at the cursor, in the text the server was
// sent: the name a rename replaces ("" when it cannot be read).
func (s *server) nameAt(c *cursor) string {
	text, _ := s.docs.text(c.abs)
	lt, _, err := lineAt(text, int(c.pos.Line)+1)
	if err != nil {
		return ""
	}
	a, b := s.enc.fromServer(lt, c.pos.Character), s.enc.fromServer(lt, c.end.Character)
	if a >= b || b > len(lt) {
		return ""
	}
	return lt[a:b]
}
