package lsp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

// fakeConfig serves .fake files with testdata/fakelsp in the given mode.
func fakeConfig(args ...string) Config {
	conf := DefaultConfig()
	conf.Servers = []ServerConfig{{Name: "fakelsp", Languages: []string{"fake"}, Extensions: map[string]string{".fake": "fake"},
		Command: append([]string{fakeBin}, args...), RootMarkers: []string{"fake.root"}}}
	conf.RestartBackoff = 10 * time.Millisecond
	conf.DiagnosticsTimeout = time.Second
	conf.Debounce = 100 * time.Millisecond
	return conf
}

var fakeHover = map[string]any{"action": "hover", "file": "a.fake", "line": 1, "symbol": "hello"}

// A read-only query whose server exits under it is asked once more of the
// restarted server; a rename never is.
func TestServerCrashesMidRequest(t *testing.T) {
	crashes := func(f *fixture) float64 {
		return testutil.ToFloat64(f.p.metrics.SessionEnds.WithLabelValues(metrics.KindLSP, metrics.ReasonCrashed))
	}
	starts := func(f *fixture) float64 {
		return testutil.ToFloat64(f.p.metrics.SessionStarts.WithLabelValues(metrics.KindLSP, "ok"))
	}
	// settled is count once it reaches want, or after 10 s: a session's
	// watcher counts its crash after the call that saw it has failed.
	settled := func(f *fixture, count func(*fixture) float64, want float64) float64 {
		for deadline := time.Now().Add(10 * time.Second); count(f) < want && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		return count(f)
	}
	t.Run("once", func(t *testing.T) {
		flag := filepath.Join(t.TempDir(), "crashed")
		f := newFixture(t, "fake", fakeConfig("-mode", "crash-on-hover", "-once", flag))
		contains(t, f.ok(t, fakeHover), "fake hover from pid")
		if st := f.ok(t, map[string]any{"action": "status"}); !strings.Contains(st, "fakelsp for root .: ") || !strings.Contains(st, ", pid ") {
			t.Errorf("status after the restart:\n%s", st)
		}
		if settled(f, crashes, 1); crashes(f) != 1 || starts(f) != 2 {
			t.Errorf("crashed sessions %v, started %v: want 1 and 2", crashes(f), starts(f))
		}
	})
	t.Run("every time", func(t *testing.T) {
		f := newFixture(t, "fake", fakeConfig("-mode", "crash-on-hover"))
		contains(t, f.fails(t, fakeHover), "fakelsp exited during the request; it is restarted on the next call: call again")
		if n := settled(f, crashes, 2); n != 2 {
			t.Errorf("crashed sessions: %v, want 2 (the query and its one retry)", n)
		}
	})
	t.Run("rename", func(t *testing.T) {
		f := newFixture(t, "fake", fakeConfig("-mode", "crash-on-rename"))
		text, isErr := f.call(t, "lsp_rename", map[string]any{"file": "a.fake", "line": 1, "symbol": "hello", "new_name": "bye"})
		if !isErr {
			t.Fatalf("want an error result, got:\n%s", text)
		}
		contains(t, text, "fakelsp exited during the request; it is restarted on the next call: call again")
		if settled(f, crashes, 1); crashes(f) != 1 || starts(f) != 1 {
			t.Errorf("crashed sessions %v, started %v: want 1 and 1 (a rename is not retried)", crashes(f), starts(f))
		}
		if got := f.read(t, "a.fake"); got != "hello fake\nsecond line\n" {
			t.Errorf("the file changed: %q", got)
		}
	})
}

// References, implementation and workspace symbols wait for the initial
// workspace load ($/progress), up to the load timeout, and say so when it
// had not ended.
func TestWorkspaceQueriesWaitForTheLoad(t *testing.T) {
	symbols := map[string]any{"action": "symbols", "query": "x", "file": "a.fake"}
	f := newFixture(t, "fake", fakeConfig("-mode", "loading", "-load", "2s"))
	text := f.ok(t, symbols)
	contains(t, text, "loaded=true")
	if strings.Contains(text, "had not finished") {
		t.Errorf("the load ended within the timeout:\n%s", text)
	}
	conf := fakeConfig("-mode", "loading", "-load", "1m")
	conf.LoadTimeout = 300 * time.Millisecond
	f = newFixture(t, "fake", conf)
	contains(t, f.ok(t, symbols), "loaded=false", "fakelsp had not finished loading the workspace; the list may be incomplete")
	contains(t, f.ok(t, map[string]any{"action": "status"}), "fakelsp for root .: loading, started cold at the first call")
}

func TestRestartCap(t *testing.T) {
	conf := fakeConfig("-mode", "crash-on-start")
	conf.MaxRestarts = 2
	f := newFixture(t, "fake", conf)
	for i := 0; i < 3; i++ {
		contains(t, f.fails(t, fakeHover), "fakelsp did not initialize in .", "fakelsp: cannot start: crashing on purpose")
	}
	contains(t, f.fails(t, fakeHover), "fakelsp for . failed 3 times in a row", `until you call lsp with action "reload"`)
	contains(t, f.ok(t, map[string]any{"action": "status"}), "fakelsp for root .: down", "3 failure(s) in a row")
	contains(t, f.fails(t, map[string]any{"action": "reload", "file": "a.fake"}), "restarting fakelsp (root .)", "cannot start")
	if n := testutil.ToFloat64(f.p.metrics.SessionStarts.WithLabelValues(metrics.KindLSP, "error")); n != 4 {
		t.Errorf("failed starts: %v, want 4", n)
	}
}

func TestContentModifiedIsRetried(t *testing.T) {
	f := newFixture(t, "fake", fakeConfig("-mode", "content-modified"))
	contains(t, f.ok(t, fakeHover), "after 2 ContentModified")
	// The fake offers hover only.
	for _, action := range []string{"definition", "references", "code_actions"} {
		contains(t, f.fails(t, map[string]any{"action": action, "file": "a.fake", "line": 1, "symbol": "hello"}), "fakelsp does not support "+action)
	}
	contains(t, f.fails(t, map[string]any{"action": "symbols", "file": "a.fake"}), "fakelsp does not support document symbols")
}

// Silence and stale diagnostics are never reported as clean.
func TestSilenceIsUnknown(t *testing.T) {
	for _, mode := range []string{"silent", "stale"} {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, "fake", fakeConfig("-mode", mode))
			rep := f.write(t, "a.fake", "changed\n")
			if rep.State != orchestrator.WriteUnknown || len(rep.Diagnostics) != 0 {
				t.Errorf("want unknown, got %s: %s", rep.State, rep.Text)
			}
			contains(t, rep.Text, "a.fake: fakelsp gave no diagnostics for this version in time")
			contains(t, f.fails(t, map[string]any{"action": "diagnostics", "file": "a.fake"}), "the state is unknown, not clean")
		})
	}
	f := newFixture(t, "fake", fakeConfig())
	if rep := f.write(t, "a.fake", "changed\n"); rep.State != orchestrator.WriteClean {
		t.Errorf("a server that answers for the version: want clean, got %s: %s", rep.State, rep.Text)
	}
	// A deleted file is closed at the server, not reported as unknown.
	if err := os.Remove(filepath.Join(f.dir, "a.fake")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if rep, err := f.p.DidWrite(ctx, f.run, []string{"a.fake"}); err != nil || rep.State != orchestrator.WriteClean {
		t.Errorf("a deleted file: %v %+v", err, rep)
	}
	// No paths: nothing was checked, which is not clean either.
	if rep, err := f.p.DidWrite(ctx, f.run, nil); err != nil || rep.State != orchestrator.WriteUnknown {
		t.Errorf("no paths: %v %+v", err, rep)
	}
}

// With parking off (lsp.keep_warm: 0), servers end with their run, as
// they did before parking: nothing is parked. Issue 28 item 2.
func TestServersEndWithTheRunWithoutKeepWarm(t *testing.T) {
	conf := fakeConfig()
	conf.KeepWarm = 0
	f := newFixture(t, "fake", conf)
	f.ok(t, fakeHover)
	s := f.p.state(f.run).sv.snapshot()[0].srv
	f.run.End(orchestrator.EndStopped)
	select {
	case <-s.proc.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the server outlived its run")
	}
	if n := testutil.ToFloat64(f.p.metrics.SessionsActive.WithLabelValues(metrics.KindLSP, metrics.DriverHost)); n != 0 {
		t.Errorf("active sessions after the run ended: %v", n)
	}
	if n := testutil.ToFloat64(f.p.metrics.LSPParked.WithLabelValues(metrics.DriverHost)); n != 0 || len(f.p.pool.list("host", "local")) != 0 {
		t.Errorf("parked servers with keep_warm 0: %v", n)
	}
	noProcessesIn(t, f.dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := f.reg.Call(ctx, f.run, orchestrator.SurfaceFull, "lsp", []byte(`{"action":"status"}`))
	if err == nil && !res.IsError && !strings.Contains(res.FirstText(), "ended") {
		t.Errorf("a call on an ended run: %v %+v", err, res)
	}
}

// Two racing first calls share one start.
func TestRacingCallsShareAStart(t *testing.T) {
	f := newFixture(t, "fake", fakeConfig())
	done := make(chan string, 4)
	raw, _ := json.Marshal(fakeHover)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 0; i < 4; i++ {
		go func() { // t.Fatal belongs to the test's goroutine: errors travel as text
			res, err := f.reg.Call(ctx, f.run, orchestrator.SurfaceFull, "lsp", raw)
			if err != nil {
				done <- err.Error()
				return
			}
			done <- res.FirstText()
		}()
	}
	for i := 0; i < 4; i++ {
		contains(t, <-done, "fake hover from pid")
	}
	if n := testutil.ToFloat64(f.p.metrics.SessionStarts.WithLabelValues(metrics.KindLSP, "ok")); n != 1 {
		t.Errorf("starts: %v, want 1", n)
	}
}

// reload starts a server that never ran (once) and restarts one that
// runs.
func TestReload(t *testing.T) {
	f := newFixture(t, "fake", fakeConfig())
	contains(t, f.ok(t, map[string]any{"action": "reload"}), "no language server is running for this run")
	contains(t, f.ok(t, map[string]any{"action": "reload", "file": "a.fake"}), "started fakelsp (root .)", "it was not running")
	contains(t, f.ok(t, map[string]any{"action": "reload", "file": "a.fake"}), "restarted fakelsp (root .)")
	contains(t, f.ok(t, map[string]any{"action": "reload"}), "restarted fakelsp (root .)")
	if n := testutil.ToFloat64(f.p.metrics.SessionStarts.WithLabelValues(metrics.KindLSP, "ok")); n != 3 {
		t.Errorf("starts: %v, want 3", n)
	}
	contains(t, f.ok(t, fakeHover), "fake hover from pid")
}

// Reloads racing queries leave one server per root, and the run's end
// ends it.
func TestReloadRacesCalls(t *testing.T) {
	f := newFixture(t, "fake", fakeConfig())
	f.ok(t, fakeHover)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reload, _ := json.Marshal(map[string]any{"action": "reload", "file": "a.fake"})
	hover, _ := json.Marshal(fakeHover)
	errs := make(chan error, 16)
	for i := 0; i < 8; i++ {
		for _, raw := range []json.RawMessage{reload, hover} {
			go func() {
				res, err := f.reg.Call(ctx, f.run, orchestrator.SurfaceFull, "lsp", raw)
				if err == nil && res.IsError {
					err = fmt.Errorf("%s: %s", raw, res.FirstText())
				}
				errs <- err
			}()
		}
	}
	for i := 0; i < 16; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	ended := make(chan struct{})
	go func() {
		f.run.End(orchestrator.EndStopped)
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the run's end waits for a server it does not know of")
	}
	if n := testutil.ToFloat64(f.p.metrics.SessionsActive.WithLabelValues(metrics.KindLSP, metrics.DriverHost)); n != 0 {
		t.Errorf("active sessions after the run ended: %v", n)
	}
}

// A read-only query whose server Berth closes on purpose under it, as a
// reload racing the query does once its drain is over, follows it to the
// server that replaces it, and again when that one is closed too: the
// query is answered, not told to call again. A crash is asked about once
// more only (TestServerCrashesMidRequest).
func TestAQueryFollowsItsServerThroughReplacements(t *testing.T) {
	hovers := filepath.Join(t.TempDir(), "hovers")
	f := newFixture(t, "fake", fakeConfig("-mode", "hang-on-hover", "-once", hovers))
	done := make(chan string, 1)
	raw, _ := json.Marshal(fakeHover)
	go func() {
		res, err := f.reg.Call(context.Background(), f.run, orchestrator.SurfaceFull, "lsp", raw)
		switch {
		case err != nil:
			done <- "error: " + err.Error()
		case res.IsError:
			done <- "error: " + res.FirstText()
		default:
			done <- res.FirstText()
		}
	}()
	closed := 0 // servers closed under the query
	for deadline := time.Now().Add(time.Minute); closed < 2; {
		select {
		case text := <-done:
			t.Fatalf("answered after %d replacements, want 2: %s", closed, text)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute, %d of the 2 servers were seen with the query in flight", closed)
		}
		sv := f.p.state(f.run).sv
		for _, sl := range sv.snapshot() {
			sv.mu.Lock()
			srv := sl.srv
			sv.mu.Unlock()
			if srv != nil && srv.proc.inflight.Load() > 0 && !srv.proc.isClosing() {
				srv.proc.close()
				closed++
			}
		}
	}
	select {
	case text := <-done:
		contains(t, text, "fake hover from pid")
	case <-time.After(30 * time.Second):
		t.Fatal("the query was not answered after its servers were replaced")
	}
	if b, _ := os.ReadFile(hovers); len(b) != 3 {
		t.Errorf("hovers asked: %d, want 3 (one per server)", len(b))
	}
}

// retried follows servers replaced on purpose up to maxReplaced times, and
// asks again after a crash once, whatever came before it.
func TestRetriedFollowsReplacementsButAsksAgainAfterOneCrashOnly(t *testing.T) {
	for _, c := range []struct {
		name   string
		losses []loss // what each try reports, until it is kept
		tries  int
	}{
		{"kept", []loss{kept}, 1},
		{"one crash", []loss{crashed, kept}, 2},
		{"two crashes", []loss{crashed, crashed, kept}, 2},
		{"replacements", []loss{replaced, replaced, replaced, kept}, 4},
		{"replacements without end", []loss{replaced, replaced, replaced, replaced, replaced, replaced, kept}, maxReplaced + 1},
		{"replacements then a crash", []loss{replaced, replaced, crashed, kept}, 4},
		{"crash, replacement, crash", []loss{crashed, replaced, crashed, kept}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			tries := 0
			retried(context.Background(), func() (*orchestrator.Result, loss) {
				l := c.losses[tries]
				tries++
				return orchestrator.Text("answer"), l
			})
			if tries != c.tries {
				t.Errorf("tries: %d, want %d", tries, c.tries)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tries := 0
	retried(ctx, func() (*orchestrator.Result, loss) { tries++; return orchestrator.Text("answer"), replaced })
	if tries != 1 {
		t.Errorf("tries after the call's context ended: %d, want 1", tries)
	}
}

// A report on another file that comes after a write's debounce is not
// lost: the next write reports it (and a file first reported on between
// writes is taken as it is).
func TestLateReportOnAnotherFile(t *testing.T) {
	conf := fakeConfig("-mode", "late", "-load", "400ms")
	f := newFixture(t, "fake", conf)
	if err := os.WriteFile(filepath.Join(f.dir, "b.fake"), []byte("caller\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		content, state string
	}{
		{"ok\n", orchestrator.WriteClean},    // b.fake is reported on after this check
		{"ok 2\n", orchestrator.WriteClean},  // b.fake's first report is its baseline
		{"break\n", orchestrator.WriteClean}, // b.fake breaks, after this check
		{"break 2\n", orchestrator.WriteIssues},
		{"break 3\n", orchestrator.WriteClean}, // reported once
	}
	for i, st := range steps {
		rep := f.write(t, "a.fake", st.content)
		if rep.State != st.state {
			t.Fatalf("write %d (%q): want %s, got %s: %s", i+1, st.content, st.state, rep.State, rep.Text)
		}
		if st.state == orchestrator.WriteIssues {
			contains(t, rep.Text, "b.fake:1:1: error: broken by a.fake")
		}
		time.Sleep(600 * time.Millisecond) // the late report arrives between writes
	}
}

// files/willWrite records what a file had before the write: an old
// problem is then not reported as new. Without it, a file the server
// never saw has no baseline and its problems count as the write's.
func TestWillWriteRecordsTheBaseline(t *testing.T) {
	for _, c := range []struct {
		willWrite bool
		state     string
	}{{true, orchestrator.WriteClean}, {false, orchestrator.WriteIssues}} {
		f := newFixture(t, "fake", fakeConfig())
		if err := os.WriteFile(filepath.Join(f.dir, "c.fake"), []byte("bad\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if c.willWrite {
			if err := f.p.WillWrite(ctx, f.run, []string{"c.fake"}); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(f.dir, "c.fake"), []byte("ok\nbad\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		rep, err := f.p.DidWrite(ctx, f.run, []string{"c.fake"})
		if err != nil || rep.State != c.state {
			t.Errorf("willWrite %v: want %s, got %v %+v", c.willWrite, c.state, err, rep)
		}
	}
}

// A server whose own way of being asked for its diagnostics fails (here
// an entry that names gopls's command for a server without it) is
// checked by waiting for its publishes instead: the written file's
// problems are still reported, and the report says that problems in
// other files may be missing, never that the write is clean.
//
// Issue 28: gopls's diagnostics are pulled through gopls.diagnose_files.
func TestAWriteWhoseDiagnosticsPullFailsSaysWhatMayBeMissing(t *testing.T) {
	conf := fakeConfig("-mode", "command-fails")
	conf.Servers[0].PullDiagnostics = pullGopls
	f := newFixture(t, "fake", conf)
	rep := f.write(t, "a.fake", "bad line\n")
	if rep.State != orchestrator.WriteIssues {
		t.Fatalf("want issues, got %s: %s", rep.State, rep.Text)
	}
	contains(t, rep.Text, "a.fake:1:1: error: bad here",
		"fakelsp could not diagnose the workspace for this write", "unknown command", "problems it caused in other files may be missing")
	rep = f.write(t, "a.fake", "fine\n")
	if rep.State == orchestrator.WriteClean {
		t.Errorf("a write whose pull failed was called clean: %s", rep.Text)
	}
}
