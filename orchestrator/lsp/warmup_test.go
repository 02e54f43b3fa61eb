package lsp

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// goplsOf is the fixture's ready gopls.
func (f *fixture) goplsOf(t *testing.T) *server {
	t.Helper()
	return f.serverNamed(t, "gopls")
}

// serverNamed is the run's ready server of the entry name.
func (f *fixture) serverNamed(t *testing.T, name string) *server {
	t.Helper()
	for _, sl := range f.p.state(f.run).sv.snapshot() {
		if sl.key.name == name && sl.srv != nil {
			return sl.srv
		}
	}
	t.Fatalf("the run has no ready %s", name)
	return nil
}

// A server prewarm started cold is asked, once loaded, for references
// in the first file under its root, and the file is closed again: the
// run's first call finds the package analysed, and no document it did
// not ask for open. With lsp.warm_up off, nothing is asked.
//
// Issue 28: with prewarm and 3 s of thinking time, a run's first lsp
// call within 2x a warm call.
func TestAServerPrewarmStartedColdAnswersAWarmUpQueryBeforeTheFirstCall(t *testing.T) {
	f := newFixtureIn(t, prewarmProject(t), "run-warm-up", DefaultConfig(), "pyright-langserver")
	f.reg.RunStarted(f.run)
	f.waitStatus(t, "gopls for root .: ready, started cold at run/start (prewarm), warmed up (references in greet/greet.go, ")
	s := f.goplsOf(t)
	if s.docs.has(filepath.Join(f.dir, "greet", "greet.go")) {
		t.Error("the warm-up left its file open")
	}
	// The files its answer names, but its own (open while it asked), are
	// read into the line cache, for the first list's recheck.
	main := filepath.Join(f.dir, "main.go")
	s.cache.mu.Lock()
	recent, cached := slices.Clone(s.cache.recent), s.cache.files[main].lines != nil
	s.cache.mu.Unlock()
	if !cached || !slices.Equal(recent, []string{main}) {
		t.Errorf("after the warm-up, main.go cached: %v, the files for the next recheck: %q; want main.go in both", cached, recent)
	}
	if n := testutil.ToFloat64(f.p.metrics.LSPWarmUps.WithLabelValues("gopls")); n != 1 {
		t.Errorf("berth_lsp_warm_ups_total{server=gopls} is %v, want 1", n)
	}
	contains(t, f.ok(t, goplsRefs), "main.go:11")
	// A warm-up after a list keeps the list's files for the recheck.
	s.cache.setRecent([]string{filepath.Join(f.dir, "listed.go")})
	if asked, _, err := s.warmUp(context.Background(), filepath.Join(f.dir, "greet", "greet.go")); !asked || err != nil {
		t.Fatalf("a second warm-up: asked %v (%v)", asked, err)
	}
	s.cache.mu.Lock()
	recent = slices.Clone(s.cache.recent)
	s.cache.mu.Unlock()
	if !slices.Equal(recent, []string{filepath.Join(f.dir, "listed.go")}) {
		t.Errorf("a warm-up after a list replaced its files for the recheck with %q", recent)
	}
	f.end(t)

	conf := DefaultConfig()
	conf.WarmUp = false
	off := newFixtureIn(t, prewarmProject(t), "run-no-warm-up", conf, "pyright-langserver")
	off.reg.RunStarted(off.run)
	st := off.waitStatus(t, "gopls for root .: ready, started cold at run/start (prewarm)")
	if strings.Contains(st, "warmed up") {
		t.Errorf("lsp.warm_up: false still warmed up:\n%s", st)
	}
	if n := testutil.ToFloat64(off.p.metrics.LSPWarmUps.WithLabelValues("gopls")); n != 0 {
		t.Errorf("berth_lsp_warm_ups_total{server=gopls} is %v with lsp.warm_up off, want 0", n)
	}
	off.end(t)
}

// TestATypeScriptWarmUpAsksAboutTheFileItsLoadProbeOpened: tsserver
// loads a project only for an open file, so its load probe opens the
// first file under the root; the warm-up asks about that file, which
// stays open (the probe's), rather than walking the root again.
func TestATypeScriptWarmUpAsksAboutTheFileItsLoadProbeOpened(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	copyTree(t, filepath.Join("testdata", "ts"), dir)
	f := newFixtureIn(t, dir, "run-ts-warm-up", DefaultConfig())
	f.reg.RunStarted(f.run)
	var probed string
	for _, sc := range DefaultServers() {
		if sc.Name == "typescript-language-server" {
			probed = firstFile(dir, sc)
		}
	}
	rel, err := filepath.Rel(dir, probed)
	if probed == "" || err != nil {
		t.Fatalf("no TypeScript file in the fixture (%v)", err)
	}
	f.waitStatus(t, "typescript-language-server for root .: ready, started cold at run/start (prewarm), warmed up (references in "+filepath.ToSlash(rel)+", ")
	if !f.serverNamed(t, "typescript-language-server").docs.has(probed) {
		t.Error("the warm-up closed the file the load probe had opened")
	}
	if n := testutil.ToFloat64(f.p.metrics.LSPWarmUps.WithLabelValues("typescript-language-server")); n != 1 {
		t.Errorf("berth_lsp_warm_ups_total{server=typescript-language-server} is %v, want 1", n)
	}
	f.end(t)
}

// A warm-up never closes what anything else opened or synced: a file a
// call has open is asked about and left open, and a file a call synced
// while the warm-up had it open (between the call's sync and its use)
// stays open, the call's. A file no one else touched is closed again.
func TestAWarmUpLeavesACallsDocumentOpen(t *testing.T) {
	conf := DefaultConfig()
	conf.PrewarmMax = 0
	f := newFixture(t, "go", conf)
	contains(t, f.ok(t, goplsRefs), "main.go:11") // gopls starts, greet.go is the call's
	s := f.goplsOf(t)
	ctx := context.Background()
	greet, main := filepath.Join(f.dir, "greet", "greet.go"), filepath.Join(f.dir, "main.go")
	if asked, _, err := s.warmUp(ctx, greet); !asked || err != nil {
		t.Errorf("a warm-up of a file the call has open: asked %v (%v), want asked", asked, err)
	}
	if !s.docs.has(greet) {
		t.Error("a warm-up closed the call's document")
	}

	// The warm-up's open, as warmUp makes it.
	openForWarmUp := func() uint64 {
		s.docs.order.Lock()
		defer s.docs.order.Unlock()
		if _, err := s.syncLocked(ctx, main, false); err != nil {
			t.Fatal(err)
		}
		s.docs.warming = main
		return s.docs.epoch
	}
	epoch := openForWarmUp()
	if _, err := s.sync(ctx, main, false); err != nil { // a call's sync, before it touches
		t.Fatal(err)
	}
	s.closeWarmUp(main, epoch)
	if !s.docs.has(main) {
		t.Error("the warm-up closed a document a call synced meanwhile")
	}
	s.docs.order.Lock()
	s.docs.warming = main // as though the warm-up had opened it: closed properly
	epoch = s.docs.epoch
	s.docs.order.Unlock()
	s.closeWarmUp(main, epoch)
	if s.docs.has(main) {
		t.Fatal("closeWarmUp did not close its document")
	}
	epoch = openForWarmUp()
	s.closeWarmUp(main, epoch)
	if s.docs.has(main) {
		t.Error("the warm-up left open a document no one else used")
	}
	f.end(t)
}
