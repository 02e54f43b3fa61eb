package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/orchestrator"
)

// Some model APIs refuse a whole tool list over one schema with oneOf,
// anyOf or allOf at its top level: every built-in tool keeps to an object
// whose per-action requirements are a nested if/then/else
// (orchestrator.Chain).
//
// Issue 12 item 2.
func TestNoToolSchemaHasATopLevelCombinator(t *testing.T) {
	cfg := defaultConfig()
	d, _, err := build(&cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	reg := d.Registry
	features := orchestrator.DefaultFeatures()
	for f := range features {
		features[f] = true
	}
	run := orchestrator.NewRun("schema-test", "conversation", t.TempDir(), host.New(), nil, features)
	defer run.End(orchestrator.EndStopped)
	specs := reg.List(run, orchestrator.SurfaceFull)
	if len(specs) < 13 {
		t.Fatalf("only %d tools listed", len(specs))
	}
	for _, sp := range specs {
		var top map[string]any
		if err := json.Unmarshal(sp.InputSchema, &top); err != nil {
			t.Errorf("tool %s: input schema is not a JSON object: %v", sp.Name, err)
			continue
		}
		if top["type"] != "object" {
			t.Errorf("tool %s: input schema's type is %v, want object", sp.Name, top["type"])
		}
		for _, k := range []string{"oneOf", "anyOf", "allOf"} {
			if _, ok := top[k]; ok {
				t.Errorf("tool %s: input schema has %s at its top level; express per-action requirements with orchestrator.Chain", sp.Name, k)
			}
		}
	}
}
