package lsp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.lsp.dev/protocol"

	"github.com/berth-dev/berth/orchestrator/workspace"
)

// docStore is what a server was last told of each file it has open.
// Its lock guards the documents; order is held across a whole sync, so
// the notifications for a file go out in version order.
type docStore struct {
	order sync.Mutex
	mu    sync.Mutex
	open  map[string]*document // by absolute host path
	last  string               // the file synced last: tsserver's probe asks about its project
}

// document is a file as the server was last told about it.
type document struct {
	version int32
	text    string
	syncSeq uint64    // the publish counter (diagStore.count) before this version was sent
	size    int64     // the file's size and modification time when read,
	mod     time.Time // to skip reading it again while they hold
	lines   []string  // text split into lines, made when first asked (docStore.lines)
}

// unchanged returns the open document of abs when the file still has the
// size and modification time it was read at, and notes it synced last.
func (ds *docStore) unchanged(abs string, size int64, mod time.Time) (document, bool) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	d, open := ds.open[abs]
	if !open || d.size != size || !d.mod.Equal(mod) {
		return document{}, false
	}
	ds.last = abs
	return *d, true
}

// update records text as the content of abs read at size and mod, to be
// sent after the publish counter read seq: version 1 when it was not open
// (opened), the next version when the text differs (changed), else the
// same version.
func (ds *docStore) update(abs, text string, size int64, mod time.Time, seq uint64) (doc document, opened, changed bool) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	d, open := ds.open[abs]
	switch {
	case !open:
		if ds.open == nil {
			ds.open = map[string]*document{}
		}
		d = &document{version: 1, text: text, syncSeq: seq}
		ds.open[abs] = d
	case d.text != text:
		d.version++
		d.text, d.syncSeq, d.lines, changed = text, seq, nil, true
	}
	d.size, d.mod = size, mod
	ds.last = abs
	return *d, !open, changed
}

// forget drops abs and says whether it was open.
func (ds *docStore) forget(abs string) bool {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	_, open := ds.open[abs]
	delete(ds.open, abs)
	if ds.last == abs {
		ds.last = ""
	}
	return open
}

// has says whether abs is open.
func (ds *docStore) has(abs string) bool {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	_, open := ds.open[abs]
	return open
}

// paths lists the open files but except.
func (ds *docStore) paths(except string) []string {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	out := make([]string, 0, len(ds.open))
	for abs := range ds.open {
		if abs != except {
			out = append(out, abs)
		}
	}
	return out
}

// version is the version of abs the server was sent, if open.
func (ds *docStore) version(abs string) (int32, bool) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	d, open := ds.open[abs]
	if !open {
		return 0, false
	}
	return d.version, true
}

// text returns the content the server was last sent for a file, if open.
func (ds *docStore) text(abs string) (string, bool) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	d, ok := ds.open[abs]
	if !ok {
		return "", false
	}
	return d.text, true
}

// lines returns an open file's text, as the server was sent it, split
// into lines (split once per version), and whether it is open.
func (ds *docStore) lines(abs string) ([]string, bool) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	d, ok := ds.open[abs]
	if !ok {
		return nil, false
	}
	if d.lines == nil {
		d.lines = strings.Split(d.text, "\n")
	}
	return d.lines, true
}

// lastSynced is the file synced last, "" for none.
func (ds *docStore) lastSynced() string {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	return ds.last
}

// sync tells the server the file's current content on disk: didOpen the
// first time, didChange with a new version when it changed, and didSave
// when save is set. It returns the document as sent.
func (s *server) sync(ctx context.Context, abs string, save bool) (document, error) {
	u := s.toURI(abs)
	s.docs.order.Lock()
	defer s.docs.order.Unlock()
	st, err := os.Stat(abs)
	if errors.Is(err, os.ErrNotExist) {
		return document{}, s.gone(ctx, abs)
	}
	if err != nil {
		return document{}, fmt.Errorf("reading %s: %w", workspace.Rel(s.workdir, abs), err)
	}
	if !save {
		if d, ok := s.docs.unchanged(abs, st.Size(), st.ModTime()); ok {
			return d, nil // unchanged since it was read: no need to read it again
		}
	}
	b, err := s.readFile(abs)
	if errors.Is(err, os.ErrNotExist) { // deleted since the stat
		return document{}, s.gone(ctx, abs)
	}
	if err != nil {
		return document{}, fmt.Errorf("reading %s: %w", workspace.Rel(s.workdir, abs), err)
	}
	text := string(b)
	// The counter is read before the notification goes out, so only a
	// publish counted after it can answer this version.
	cp, opened, changed := s.docs.update(abs, text, st.Size(), st.ModTime(), s.diags.count())
	switch {
	case opened:
		lang := s.cfg.Extensions[strings.ToLower(filepath.Ext(abs))]
		err = s.api.DidOpen(ctx, &protocol.DidOpenTextDocumentParams{TextDocument: protocol.TextDocumentItem{
			URI: u, LanguageID: protocol.LanguageKind(lang), Version: cp.version, Text: text}})
	case changed:
		err = s.api.DidChange(ctx, &protocol.DidChangeTextDocumentParams{
			TextDocument:   protocol.VersionedTextDocumentIdentifier{TextDocumentIdentifier: protocol.TextDocumentIdentifier{URI: u}, Version: cp.version},
			ContentChanges: []protocol.TextDocumentContentChangeEvent{&protocol.TextDocumentContentChangeWholeDocument{Text: text}},
		})
	}
	if err == nil && save {
		err = s.api.DidSave(ctx, &protocol.DidSaveTextDocumentParams{TextDocument: protocol.TextDocumentIdentifier{URI: u}})
	}
	return cp, err
}

// gone forgets a deleted file, tells the server it is closed if it was
// open, and returns errGone.
func (s *server) gone(ctx context.Context, abs string) error {
	open := s.docs.forget(abs)
	s.diags.forget(abs)
	if open {
		_ = s.api.DidClose(ctx, &protocol.DidCloseTextDocumentParams{TextDocument: protocol.TextDocumentIdentifier{URI: s.toURI(abs)}})
	}
	return fmt.Errorf("%s: %w", workspace.Rel(s.workdir, abs), errGone)
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
	if err != nil && !errors.Is(err, errGone) {
		err = s.markExited(err)
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
	return strings.Join(s.fileLines(abs, time.Time{}), "\n")
}

// errGone says a file no longer exists: it was deleted, and the server
// was told so.
var errGone = errors.New("the file no longer exists")

// hashOf is the workspace hash of a text.
func hashOf(text string) string { return workspace.Hash([]byte(text)) }
