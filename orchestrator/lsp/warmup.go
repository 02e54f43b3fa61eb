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

// warmUp asks the server for the references to the first function of
// abs, and drops the answer. It opens abs for it when no one has, and
// closes it again afterwards unless anything else synced it meanwhile (a
// call, a write, a rename): the document is theirs then. It returns
// whether it asked, and how long the references took.
func (s *server) warmUp(ctx context.Context, abs string) (asked bool, took time.Duration, err error) {
	if !supports(s.caps.DocumentSymbolProvider) || !supports(s.caps.ReferencesProvider) {
		return false, 0, errNoWarmUp
	}
	s.docs.order.Lock()
	if ctx.Err() != nil { // the run ended: its servers are parked or ended
		s.docs.order.Unlock()
		return false, 0, ctx.Err()
	}
	epoch := s.docs.epoch
	opened, err := s.openQuietlyLocked(ctx, abs)
	if opened {
		s.docs.warming = abs
	}
	s.docs.order.Unlock()
	if err != nil {
		return false, 0, err
	}
	if opened {
		defer s.closeWarmUp(abs, epoch)
	}

	uri := s.paths.toURI(abs)
	var syms protocol.DocumentSymbolResult
	err = s.proc.call(ctx, protocol.MethodTextDocumentDocumentSymbol, func(ctx context.Context) error {
		var err error
		syms, err = s.proc.api.DocumentSymbol(ctx, &protocol.DocumentSymbolParams{TextDocument: protocol.TextDocumentIdentifier{URI: uri}})
		return err
	})
	if err != nil {
		return false, 0, err
	}
	pos, ok := firstSymbol(syms)
	if !ok {
		return false, 0, nil
	}
	start := time.Now()
	var refs []protocol.Location
	err = s.proc.call(ctx, protocol.MethodTextDocumentReferences, func(ctx context.Context) error {
		var err error
		refs, err = s.proc.api.References(ctx, &protocol.ReferenceParams{
			TextDocumentPositionParams: protocol.TextDocumentPositionParams{TextDocument: protocol.TextDocumentIdentifier{URI: uri}, Position: pos},
			Context:                    protocol.ReferenceContext{IncludeDeclaration: true}})
		return err
	})
	took = time.Since(start)
	if err == nil {
		s.primeLines(ctx, refs)
	}
	return true, took, err
}

// primeLines reads into the line cache the files a warm-up's answer
// names (up to maxRecent), and notes them for the next list's recheck: a
// run's first list about the same package, whose answer names the same
// files, then shows their lines without reading the disk (0.3-0.5 ms of
// a first references on cobra). It does nothing once a list has noted
// its files (a call's list, an earlier warm-up, a run before an
// adopting one): those are what the agent looks at.
func (s *server) primeLines(ctx context.Context, refs []protocol.Location) {
	if s.cache.hasRecent() {
		return
	}
	r := newLines(s)
	for _, l := range refs {
		if len(r.files) == maxRecent || ctx.Err() != nil {
			break
		}
		if abs, inside := r.path(l.URI); inside {
			r.line(abs, 0)
		}
	}
	s.cache.offerRecent(r.fromDisk())
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

// closeWarmUp closes the document the warm-up opened, unless anything
// synced it since (syncLocked clears docs.warming: the document is the
// caller's then) or the server was parked since (parking closed it).
func (s *server) closeWarmUp(abs string, epoch uint64) {
	s.docs.order.Lock()
	defer s.docs.order.Unlock()
	if s.docs.warming != abs || s.docs.epoch != epoch {
		return
	}
	s.docs.warming = ""
	ctx, cancel := context.WithTimeout(context.Background(), parkTimeout)
	defer cancel()
	_ = s.closeLocked(ctx, abs)
}
