package main

import (
	"io"
	"log/slog"
	"testing"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/orchestrator"
)

// Every built-in tool's arguments are checked in one pass (see
// orchestrator.QuickArgCheck), not by the full validator on every call.
func TestEveryToolHasTheQuickArgumentCheck(t *testing.T) {
	cfg := defaultConfig()
	reg, _, _, err := build(&cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	features := map[string]bool{orchestrator.FeatureQuestions: true, orchestrator.FeatureVibe: true}
	run := orchestrator.NewRun("schema-test", "conversation", t.TempDir(), enclosure.Host(), nil, features)
	defer run.End(orchestrator.EndStopped)
	specs := reg.List(run, orchestrator.SurfaceFull)
	if len(specs) < 13 {
		t.Fatalf("only %d tools listed", len(specs))
	}
	for _, sp := range specs {
		if !orchestrator.QuickArgCheck(sp.InputSchema) {
			t.Errorf("tool %s: its input schema uses a keyword the quick check does not handle; keep to the ones orchestrator.QuickArgCheck lists", sp.Name)
		}
	}
}
