package ask

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/berth-dev/berth/orchestrator"
)

// args are ask_user's arguments as the model sends them; the schema has
// already checked names and types.
type args struct {
	Question string `json:"question"`
	Context  string `json:"context"`
	Options  []struct {
		Label       string `json:"label"`
		Description string `json:"description"`
	} `json:"options"`
	AllowFreeText bool `json:"allow_free_text"`
	MultiSelect   bool `json:"multi_select"`
}

// parseCard turns the arguments into a card (without its number), or
// returns a sentence saying what is wrong and what to send instead.
func parseCard(raw json.RawMessage) (orchestrator.Question, string) {
	var a args
	if err := json.Unmarshal(raw, &a); err != nil {
		return orchestrator.Question{}, "arguments are not a valid ask_user card: " + err.Error()
	}
	q := orchestrator.Question{
		Question:      strings.TrimSpace(a.Question),
		Context:       strings.TrimSpace(a.Context),
		AllowFreeText: a.AllowFreeText,
		MultiSelect:   a.MultiSelect,
	}
	if q.Question == "" {
		return q, "question is empty: write the question you need the human to answer"
	}
	seen := map[string]int{}
	for i, o := range a.Options {
		label := strings.TrimSpace(o.Label)
		if label == "" {
			return q, fmt.Sprintf("option %d has an empty label: give every option a short label the human can pick", i+1)
		}
		// Labels that differ only in case read as the same choice on a card.
		key := strings.ToLower(label)
		if j, dup := seen[key]; dup {
			return q, fmt.Sprintf("options %d and %d have the same label %q: give each option a distinct label", j, i+1, label)
		}
		seen[key] = i + 1
		q.Options = append(q.Options, orchestrator.Option{Label: label, Description: strings.TrimSpace(o.Description)})
	}
	if q.MultiSelect && len(q.Options) == 0 {
		return q, "multi_select is true but there are no options to select: add options, or drop multi_select and set allow_free_text"
	}
	if len(q.Options) == 0 && !q.AllowFreeText {
		return q, "the card has no way to answer: give options, or set allow_free_text to true (or both)"
	}
	return q, ""
}

// checkAnswer says what is wrong with an answer the harness returned for
// card q, or "" when it fits the card.
func checkAnswer(q orchestrator.Question, a *orchestrator.Answer) string {
	labels := map[string]bool{}
	for _, o := range q.Options {
		labels[o.Label] = true
	}
	for _, s := range a.Selected {
		if !labels[s] {
			return fmt.Sprintf("it selected %q, which is not one of the card's options", s)
		}
	}
	if len(a.Selected) > 1 && !q.MultiSelect {
		return fmt.Sprintf("it selected %d options on a card that allows only one", len(a.Selected))
	}
	if len(a.Selected) == 0 && strings.TrimSpace(a.Text) == "" {
		return "it selected nothing and wrote nothing"
	}
	return ""
}
