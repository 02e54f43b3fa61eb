package lsp

import (
	"context"
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
	conf.RestartBackoff = Duration(10 * time.Millisecond)
	conf.DiagnosticsTimeout = Duration(time.Second)
	conf.Debounce = Duration(100 * time.Millisecond)
	return conf
}

var fakeHover = map[string]any{"action": "hover", "file": "a.fake", "line": 1, "symbol": "hello"}

func TestServerCrashesMidRequest(t *testing.T) {
	flag := filepath.Join(t.TempDir(), "crashed")
	f := newFixture(t, "fake", fakeConfig("-mode", "crash-on-hover", "-once", flag))
	contains(t, f.fails(t, fakeHover), "fakelsp exited during the request; it is restarted on the next call: call again")
	contains(t, f.ok(t, fakeHover), "fake hover from pid")
	if st := f.ok(t, map[string]any{"action": "status"}); !strings.Contains(st, "fakelsp for root .: ") || !strings.Contains(st, ", pid ") {
		t.Errorf("status after the restart:\n%s", st)
	}
	if n := testutil.ToFloat64(f.p.metrics.SessionEnds.WithLabelValues(metrics.KindLSP, metrics.ReasonCrashed)); n != 1 {
		t.Errorf("crashed sessions: %v, want 1", n)
	}
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
}

// Servers end with their run.
func TestServersEndWithTheRun(t *testing.T) {
	f := newFixture(t, "fake", fakeConfig())
	f.ok(t, fakeHover)
	s := f.p.state(f.run).sv.snapshot()[0].srv
	f.run.End(orchestrator.EndStopped)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the server outlived its run")
	}
	if n := testutil.ToFloat64(f.p.metrics.SessionsActive.WithLabelValues(metrics.KindLSP)); n != 0 {
		t.Errorf("active sessions after the run ended: %v", n)
	}
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
	for i := 0; i < 4; i++ {
		go func() {
			text, _ := f.call(t, "lsp", fakeHover)
			done <- text
		}()
	}
	for i := 0; i < 4; i++ {
		contains(t, <-done, "fake hover from pid")
	}
	if n := testutil.ToFloat64(f.p.metrics.SessionStarts.WithLabelValues(metrics.KindLSP, "ok")); n != 1 {
		t.Errorf("starts: %v, want 1", n)
	}
}
