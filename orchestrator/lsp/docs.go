package lsp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.lsp.dev/protocol"

	"github.com/berth-dev/berth/orchestrator/workspace"
)

// sync tells the server the file's current content on disk: didOpen the
// first time, didChange with a new version when it changed, and didSave
// when save is set. It returns the document as sent.
func (s *server) sync(ctx context.Context, abs string, save bool) (document, error) {
	u := s.toURI(abs)
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	st, err := os.Stat(abs)
	if errors.Is(err, os.ErrNotExist) {
		return document{}, s.gone(ctx, abs)
	}
	if err != nil {
		return document{}, fmt.Errorf("reading %s: %w", relTo(s.workdir, abs), err)
	}
	s.mu.Lock()
	d, open := s.docs[abs]
	if open && !save && d.size == st.Size() && d.mod.Equal(st.ModTime()) {
		cp := *d // unchanged since it was read: no need to read it again
		s.lastSynced = abs
		s.mu.Unlock()
		return cp, nil
	}
	s.mu.Unlock()
	b, err := s.readFile(abs)
	if errors.Is(err, os.ErrNotExist) { // deleted since the stat
		return document{}, s.gone(ctx, abs)
	}
	if err != nil {
		return document{}, fmt.Errorf("reading %s: %w", relTo(s.workdir, abs), err)
	}
	text := string(b)
	s.mu.Lock()
	d, open = s.docs[abs]
	changed := false
	switch {
	case !open:
		d = &document{version: 1, text: text, syncSeq: s.seq}
		s.docs[abs] = d
	case d.text != text:
		d.version++
		d.text, d.syncSeq, d.lines, changed = text, s.seq, nil, true
	}
	d.size, d.mod = st.Size(), st.ModTime()
	cp := *d
	s.lastSynced = abs
	s.mu.Unlock()
	switch {
	case !open:
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
	s.mu.Lock()
	_, open := s.docs[abs]
	delete(s.docs, abs)
	delete(s.diags, abs)
	if s.lastSynced == abs {
		s.lastSynced = ""
	}
	s.mu.Unlock()
	if open {
		_ = s.api.DidClose(ctx, &protocol.DidCloseTextDocumentParams{TextDocument: protocol.TextDocumentIdentifier{URI: s.toURI(abs)}})
	}
	return fmt.Errorf("%s: %w", relTo(s.workdir, abs), errGone)
}

// syncOpen re-syncs every open document whose file changed on disk since
// it was sent (the harness may have written it without files/didWrite),
// so a query never runs against a stale view of the workspace.
func (s *server) syncOpen(ctx context.Context, except string) error {
	s.mu.Lock()
	open := make([]string, 0, len(s.docs))
	for abs := range s.docs {
		if abs != except {
			open = append(open, abs)
		}
	}
	s.mu.Unlock()
	for _, abs := range open {
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

// text returns the content the server was last sent for a file, if open.
func (s *server) text(abs string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.docs[abs]
	if !ok {
		return "", false
	}
	return d.text, true
}

// docLines returns an open file's text, as the server was sent it, split
// into lines (split once per version), and whether it is open.
func (s *server) docLines(abs string) ([]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.docs[abs]
	if !ok {
		return nil, false
	}
	if d.lines == nil {
		d.lines = strings.Split(d.text, "\n")
	}
	return d.lines, true
}

// linesOf returns the text of a file for converting positions in it: as
// the server was sent it when open, else as on disk (another file the
// server reported on).
func (s *server) linesOf(abs string) string {
	if text, open := s.text(abs); open {
		return text
	}
	return strings.Join(s.fileLines(abs, time.Time{}), "\n")
}

// errGone says a file no longer exists: it was deleted, and the server
// was told so.
var errGone = errors.New("the file no longer exists")

// hashOf is the workspace hash of a text.
func hashOf(text string) string { return workspace.Hash([]byte(text)) }
