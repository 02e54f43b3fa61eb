package ask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/berth-dev/berth/orchestrator"
)

const schema = `{
  "type": "object",
  "properties": {
    "question": {"type": "string", "description": "What to ask, as one clear question."},
    "context": {"type": "string", "description": "Why you ask, and what hangs on the answer."},
    "options": {
      "type": "array",
      "description": "Choices the human can pick.",
      "items": {
        "type": "object",
        "properties": {
          "label": {"type": "string", "description": "Short, distinct label."},
          "description": {"type": "string", "description": "What choosing it means."}
        },
        "required": ["label"],
        "additionalProperties": false
      }
    },
    "allow_free_text": {"type": "boolean", "description": "Accept a typed answer."},
    "multi_select": {"type": "boolean", "description": "Several options may be chosen (needs options)."}
  },
  "required": ["question"],
  "additionalProperties": false
}`

const description = `Ask the human operator a question and wait for the answer. This is the only way to ask: never write a question as a chat message (that ends your turn).
Pass question (required), optional context (why, and what hangs on it), options [{label, description?}] and/or allow_free_text: true; multi_select: true lets several options be chosen.
Returns the selected labels and/or the typed text. If the human skips, proceed on an assumption you state, and do not ask again. If no one answers in time, or no human is connected, the call fails with the same instruction.`

// proceed is the instruction given whenever no answer will come.
const proceed = "Proceed on an assumption you state explicitly in your reply, and do not ask this question again."

// askTool is ask_user. It is parallel-safe: two independent questions asked
// in one turn become two cards the human sees side by side. Serialising them
// would hide the second card until the first is answered, and its wait in
// the queue would eat into its own timeout. The only shared state, the card
// counter, has its own lock.
type askTool struct{ p *Provider }

func (t askTool) Spec() orchestrator.Spec {
	return orchestrator.Spec{
		Name:         "ask_user",
		Tier:         orchestrator.Read,
		Description:  description,
		InputSchema:  json.RawMessage(schema),
		ParallelSafe: true,
		// The card's own timeout decides; dispatch's bound must not cut it
		// short.
		Timeout: t.p.timeout + time.Minute,
	}
}

func (t askTool) Call(ctx context.Context, run *orchestrator.Run, raw json.RawMessage) (*orchestrator.Result, error) {
	q, problem := parseCard(raw)
	if problem != "" {
		return orchestrator.Errorf("ask_user: %s.", problem), nil
	}
	if run.Harness == nil {
		return orchestrator.Errorf("ask_user failed: this run has no harness connection to show a question on. %s", proceed), nil
	}
	q.Number = t.p.nextNumber(run)
	q.Timeout = t.p.timeout

	// The deadline is the card's: when it passes, the protocol layer sees
	// the context end and cancels the pending request at the harness.
	askCtx, cancel := context.WithTimeout(ctx, t.p.timeout)
	defer cancel()
	t.p.metrics.QuestionsPending.Inc()
	ans, err := run.Harness.Ask(askCtx, q)
	t.p.metrics.QuestionsPending.Dec()

	switch {
	case err != nil && ctx.Err() != nil:
		return orchestrator.Errorf("question #%d was withdrawn before an answer came (%v); the call was cancelled or the run ended.", q.Number, context.Cause(ctx)), nil
	case err != nil && errors.Is(askCtx.Err(), context.DeadlineExceeded):
		return orchestrator.Errorf("No answer to question #%d within %s. %s", q.Number, t.p.timeout, proceed), nil
	case err != nil:
		return orchestrator.Errorf("ask_user failed at once: question #%d cannot be shown to a human: %v. %s", q.Number, err, proceed), nil
	case ans == nil:
		return orchestrator.Errorf("question #%d came back with no answer from the harness. %s", q.Number, proceed), nil
	}
	switch ans.Outcome {
	case "skipped":
		return orchestrator.Textf("The human skipped question #%d. %s", q.Number, proceed), nil
	case "answered":
		if bad := checkAnswer(q, ans); bad != "" {
			return orchestrator.Errorf("question #%d came back with an answer that does not fit the card: %s (a fault in the harness). %s", q.Number, bad, proceed), nil
		}
		return orchestrator.Text(formatAnswer(q, ans)), nil
	}
	return orchestrator.Errorf("question #%d came back with the unknown outcome %q (the harness must say \"answered\" or \"skipped\"). %s", q.Number, ans.Outcome, proceed), nil
}

// formatAnswer writes the human's choice for the model.
func formatAnswer(q orchestrator.Question, a *orchestrator.Answer) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The human answered question #%d.", q.Number)
	if len(a.Selected) > 0 {
		quoted := make([]string, len(a.Selected))
		for i, s := range a.Selected {
			quoted[i] = fmt.Sprintf("%q", s)
		}
		fmt.Fprintf(&b, "\nSelected: %s", strings.Join(quoted, ", "))
	}
	if text := strings.TrimSpace(a.Text); text != "" {
		fmt.Fprintf(&b, "\nText: %s", text)
	}
	return b.String()
}
