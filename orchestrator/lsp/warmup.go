package lsp

import (
	"context"
	"errors"
	"slices"
	"time"

	"go.lsp.dev/protocol"
)

// A warm-up is a query a prewarmed server answers in the run's thinking
// time, so that the run's first call does not pay for what a first query
// makes a server work out. Loading a project is not all of it: gopls
// type-checks a package, with the syntax a query needs, only when a query
// first touches it, and builds the indexes of what refers to it then. On
// cobra, a first references about command.go took 80-90 ms after the load
// (a warm one 5 ms), and 11-12 ms once references about another file of
// the package had been asked and the file closed again.

// errNoWarmUp says the server offers neither document symbols nor
// references, so nothing can be asked of it.
var errNoWarmUp = errors.New("the server offers no document symbols or no references")

// warmUp opens abs, asks for the references to its first symbol, and
// closes it again unless a call used it meanwhile; the answer is dropped.
// A file a call has open already is left alone. It returns what it
// asked about, and how long the references took.
func (s *server) warmUp(ctx context.Context, abs string) (asked bool, took time.Duration, err error) {
	if !supports(s.caps.DocumentSymbolProvider) || !supports(s.caps.ReferencesProvider) {
		return false, 0, errNoWarmUp
	}
	s.docs.order.Lock()
	if s.docs.has(abs) {
		s.docs.order.Unlock()
		return false, 0, nil
	}
	epoch := s.docs.epoch
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), parkTimeout)
	_, err = s.syncLocked(sctx, abs, false)
	cancel()
	s.docs.order.Unlock()
	if err != nil {
		return false, 0, err
	}
	defer s.closeWarmUp(abs, epoch)

	rctx, cancel := context.WithTimeout(ctx, s.conf.RequestTimeout)
	defer cancel()
	uri := s.paths.toURI(abs)
	syms, err := s.proc.api.DocumentSymbol(rctx, &protocol.DocumentSymbolParams{TextDocument: protocol.TextDocumentIdentifier{URI: uri}})
	if err != nil {
		return false, 0, err
	}
	pos, ok := firstSymbol(syms)
	if !ok {
		return false, 0, nil
	}
	start := time.Now()
	_, err = s.proc.api.References(rctx, &protocol.ReferenceParams{
		TextDocumentPositionParams: protocol.TextDocumentPositionParams{TextDocument: protocol.TextDocumentIdentifier{URI: uri}, Position: pos},
		Context:                    protocol.ReferenceContext{IncludeDeclaration: true}})
	return true, time.Since(start), err
}

// firstSymbol is where the name of a document's first function or
// method starts (else its first class or type, else its first symbol):
// references to a function make a server look through what refers to
// the package, as a call's first query would.
func firstSymbol(res protocol.DocumentSymbolResult) (protocol.Position, bool) {
	type sym struct {
		kind protocol.SymbolKind
		at   protocol.Position
	}
	var syms []sym
	switch v := res.(type) {
	case protocol.DocumentSymbolSlice:
		for _, d := range v {
			syms = append(syms, sym{d.Kind, d.SelectionRange.Start})
		}
	case protocol.SymbolInformationSlice:
		for _, si := range v {
			syms = append(syms, sym{si.Kind, si.Location.Range.Start})
		}
	}
	for _, want := range [][]protocol.SymbolKind{
		{protocol.SymbolKindFunction, protocol.SymbolKindMethod},
		{protocol.SymbolKindClass, protocol.SymbolKindStruct, protocol.SymbolKindInterface},
	} {
		for _, s := range syms {
			if slices.Contains(want, s.kind) {
				return s.at, true
			}
		}
	}
	if len(syms) > 0 {
		return syms[0].at, true
	}
	return protocol.Position{}, false
}

// closeWarmUp closes the warm-up's document, unless a call used it since
// (it is the call's now) or the server was parked since (parking closed
// it).
func (s *server) closeWarmUp(abs string, epoch uint64) {
	s.docs.order.Lock()
	defer s.docs.order.Unlock()
	if s.docs.epoch != epoch || s.docs.usedAt(abs) {
		return
	}
	if !s.docs.forget(abs) {
		return
	}
	s.diags.forget(abs)
	ctx, cancel := context.WithTimeout(context.Background(), parkTimeout)
	defer cancel()
	_ = s.proc.api.DidClose(ctx, &protocol.DidCloseTextDocumentParams{TextDocument: protocol.TextDocumentIdentifier{URI: s.paths.toURI(abs)}})
	_ = s.keep.Load().opened(s)
}
