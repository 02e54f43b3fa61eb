package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// startWithConfig starts "serve --stdio --config F" where F holds yaml.
func startWithConfig(t *testing.T, yaml string) *rpc.Client {
	t.Helper()
	file := filepath.Join(t.TempDir(), "berth.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return startStdioArgs(t, nil, "serve", "--stdio", "--config", file)
}

// human is the harness's side of harness/ask: it answers by the card's
// question, and records every card and how each wait ended.
type human struct {
	mu        sync.Mutex
	cards     []rpc.AskParams
	cancelled chan error // the ctx error of a card left unanswered
}

func (h *human) ask(ctx context.Context, p rpc.AskParams) (*orchestrator.Answer, error) {
	h.mu.Lock()
	h.cards = append(h.cards, p)
	h.mu.Unlock()
	switch p.Card.Question {
	case "Which database?":
		return &orchestrator.Answer{Outcome: "answered", Selected: []string{"Postgres"}, Text: "the managed one"}, nil
	case "Rename the package?":
		return &orchestrator.Answer{Outcome: "skipped"}, nil
	case "Anyone there?":
		// Nobody answers: wait until Berth cancels the card.
		select {
		case <-ctx.Done():
			h.cancelled <- ctx.Err()
			return nil, ctx.Err()
		case <-time.After(time.Minute):
			h.cancelled <- errors.New("the card was never cancelled")
			return nil, errors.New("test human gave up")
		}
	}
	return nil, errors.New("no human is connected to this conversation")
}

// ask_user's four outcomes through the real binary: answered, skipped,
// timed out (with the card cancelled at the harness), and a harness error.
func TestAskUserOutcomes(t *testing.T) {
	c := startWithConfig(t, "questions:\n  timeout: 1s\n")
	h := &human{cancelled: make(chan error, 1)}
	c.OnAsk(h.ask)
	r, err := c.StartRun(testCtx(t), rpc.StartRunParams{Workdir: t.TempDir(), ConversationID: "conv-ask",
		Features: map[string]bool{orchestrator.FeatureQuestions: true}})
	if err != nil {
		t.Fatal(err)
	}
	run := r.RunID

	for _, tc := range []struct {
		name    string
		args    map[string]any
		isError bool
		want    []string
	}{
		{"answered", map[string]any{"question": "Which database?", "context": "the schema depends on it",
			"options": []map[string]string{{"label": "Postgres", "description": "managed"}, {"label": "SQLite"}}, "allow_free_text": true},
			false, []string{"answered question #1", `Selected: "Postgres"`, "Text: the managed one"}},
		{"skipped", map[string]any{"question": "Rename the package?", "options": []map[string]string{{"label": "yes"}, {"label": "no"}}},
			false, []string{"skipped question #2", "assumption", "do not ask this question again"}},
		{"timed out", map[string]any{"question": "Anyone there?", "allow_free_text": true},
			true, []string{"No answer to question #3 within 1s", "assumption", "do not ask this question again"}},
		{"no human", map[string]any{"question": "Deploy now?", "allow_free_text": true},
			true, []string{"failed at once", "no human is connected to this conversation"}},
		{"invalid card", map[string]any{"question": "Pick", "multi_select": true, "allow_free_text": true},
			true, []string{"multi_select is true but there are no options"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			res := callToolOn(t, c, run, orchestrator.SurfacePlan, "ask_user", tc.args)
			if res.IsError != tc.isError {
				t.Fatalf("isError = %v, want %v: %s", res.IsError, tc.isError, text(res))
			}
			for _, w := range tc.want {
				if !strings.Contains(text(res), w) {
					t.Errorf("result %q lacks %q", text(res), w)
				}
			}
			if tc.name == "timed out" {
				select {
				case err := <-h.cancelled:
					if !errors.Is(err, context.Canceled) {
						t.Fatalf("the unanswered card ended with %v, want a cancellation from Berth", err)
					}
				case <-time.After(30 * time.Second):
					t.Fatal("Berth never cancelled the unanswered card at the harness")
				}
			}
			if tc.name == "no human" && time.Since(start) > 5*time.Second {
				t.Errorf("a harness error took %s to fail; it must fail at once", time.Since(start))
			}
		})
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.cards) != 4 {
		t.Fatalf("the harness saw %d cards, want 4 (the invalid one never reaches it)", len(h.cards))
	}
	first := h.cards[0]
	if first.RunID != run || first.TimeoutSeconds != 1 || first.Card.Context != "the schema depends on it" ||
		!first.Card.AllowFreeText || len(first.Card.Options) != 2 || first.Card.Options[0].Description != "managed" {
		t.Errorf("first card: %+v", first)
	}
	for i, p := range h.cards {
		if p.Card.Number != i+1 {
			t.Errorf("card %d is numbered %d", i+1, p.Card.Number)
		}
	}
}

// A harness with no question handler answers harness/ask with an error:
// ask_user fails at once with its reason. The tool follows the questions
// feature through run/update.
func TestAskUserFeatureAndNoHandler(t *testing.T) {
	c := startStdio(t)
	run := newRun(t, c, "", nil)
	if names := toolNames(t, c, run, orchestrator.SurfaceFull); slices.Contains(names, "ask_user") {
		t.Fatalf("questions is off by default, yet tools/list has ask_user: %v", names)
	}
	res := callTool(t, c, run, "ask_user", map[string]any{"question": "q", "allow_free_text": true})
	if !res.IsError || !strings.Contains(text(res), `feature "questions" is off`) {
		t.Fatalf("ask_user with questions off: %+v", res)
	}
	if err := c.UpdateRun(testCtx(t), run, map[string]bool{orchestrator.FeatureQuestions: true}); err != nil {
		t.Fatal(err)
	}
	if names := toolNames(t, c, run, orchestrator.SurfaceReadonly); !slices.Contains(names, "ask_user") {
		t.Fatalf("after run/update questions=true, tools/list lacks ask_user: %v", names)
	}
	start := time.Now()
	res = callTool(t, c, run, "ask_user", map[string]any{"question": "q", "allow_free_text": true})
	if !res.IsError || !strings.Contains(text(res), "no question handler") {
		t.Fatalf("ask_user without a handler: %+v", res)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("failing for want of a human took %s", d)
	}
}
