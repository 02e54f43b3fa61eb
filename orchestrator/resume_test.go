package orchestrator_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/errclass"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
	"github.com/berth-dev/berth/orchestrator/state"
)

// keepingRuns is a run table keeping its state in dir, as serve makes
// it, and the store (closed at the test's end).
func keepingRuns(t *testing.T, dir string) (*orchestrator.Runs, *state.Store) {
	t.Helper()
	s, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	rs := orchestrator.NewRuns(metrics.NewForTest(), time.Hour, hostOnly())
	rs.Keeping = &orchestrator.Keeping{Store: s, Grace: time.Minute, Log: slog.New(slog.DiscardHandler)}
	return rs, s
}

// A run is recorded in the state while it lives, kept processes or not:
// a Berth that comes back on the directory gives it back to a run/start
// with the same ids (Resumed, so its tools say what the restart lost),
// refuses one that differs, and forgets it when no run/start claims it
// within the grace. A run that ended, or that an orderly stop ended,
// leaves no record.
//
// Issue 29 item 3 (runs with no kept process).
func TestARunIsResumedAfterARestartWithNoKeptProcess(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	work := t.TempDir()
	ctx := context.Background()
	before, s := keepingRuns(t, dir)
	for _, id := range []string{"kept", "stopped", "unclaimed"} {
		if _, err := before.Start(ctx, orchestrator.StartParams{RunID: id, ConversationID: "conv", Workdir: work, Owner: "c"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := before.Stop("stopped", "c"); err != nil {
		t.Fatal(err)
	}
	if runs, _ := s.Runs(); len(runs) != 2 {
		t.Fatalf("the state's runs: %+v, want the two live ones", runs)
	}
	// The Berth goes away without stopping: its store is released as a
	// kill -9 leaves it, and the next Berth opens the directory.
	s.Close()

	after, s2 := keepingRuns(t, dir)
	after.Reattach(ctx, nil, 300*time.Millisecond)
	if _, err := after.Start(ctx, orchestrator.StartParams{RunID: "kept", ConversationID: "another", Workdir: work, Owner: "c2"}); !errors.Is(err, errclass.ErrConflict) {
		t.Fatalf("run/start of the run with another conversation: %v, want a conflict", err)
	}
	run, err := after.Start(ctx, orchestrator.StartParams{RunID: "kept", ConversationID: "conv", Workdir: work, Owner: "c2"})
	if err != nil {
		t.Fatal(err)
	}
	if !run.Resumed {
		t.Fatal("the run from before the restart is not resumed")
	}
	fresh, err := after.Start(ctx, orchestrator.StartParams{RunID: "stopped", ConversationID: "conv", Workdir: work, Owner: "c2"})
	if err != nil || fresh.Resumed {
		t.Fatalf("a run that had ended before the restart: %v, resumed %v; want a new run", err, fresh != nil && fresh.Resumed)
	}
	// Past the grace "unclaimed" is forgotten: its record goes with its
	// pending entry, under one lock.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		runs, _ := s2.Runs()
		if !slices.ContainsFunc(runs, func(r state.Run) bool { return r.Run == "unclaimed" }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run unclaimed past the grace (300ms) is still recorded: %+v", runs)
		}
	}
	again, err := after.Start(ctx, orchestrator.StartParams{RunID: "unclaimed", ConversationID: "conv", Workdir: work, Owner: "c2"})
	if err != nil || again.Resumed {
		t.Fatalf("a run unclaimed past the grace: %v; want a new run", err)
	}
	after.StopAll()
	if runs, _ := s2.Runs(); len(runs) != 0 {
		t.Fatalf("the state's runs after an orderly stop: %+v", runs)
	}
	s2.Close()
}
