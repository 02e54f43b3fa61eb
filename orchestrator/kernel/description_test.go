package kernel

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/berth-dev/berth/orchestrator/metrics"
)

// The 5-to-10-word rule of eval's description is in its schema, as a
// pattern, so the model sees it before calling (issue 24 item 18); the
// pattern and the call-time check agree, and the call-time check still
// words its refusal for a caller that skipped the schema.
func TestEvalSchemaStatesTheDescriptionRule(t *testing.T) {
	tool := &evalTool{cfg: testConfig(), m: metrics.NewForTest()}
	var schema struct {
		Properties map[string]struct {
			Pattern     string `json:"pattern"`
			Description string `json:"description"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(tool.Spec().InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	p := schema.Properties["description"]
	if p.Pattern == "" {
		t.Fatalf("eval's schema gives description no pattern: %+v", p)
	}
	if !strings.Contains(p.Description, "5-10 words") {
		t.Errorf("description's own description does not state the rule: %q", p.Description)
	}
	re := regexp.MustCompile(p.Pattern)
	for _, d := range []string{
		"", "one", "run it", "four words in all", "five words are here now",
		"ten words: a b c d e f g h i", "eleven words: a b c d e f g h i j",
		"  padded five words are here  ", "tabs\tand\nnewlines split the words too",
		"load the sales data and plot monthly totals",
	} {
		n := len(strings.Fields(d))
		if want := n >= 5 && n <= 10; re.MatchString(d) != want {
			t.Errorf("pattern on %q (%d words): match %v, the call-time check says %v", d, n, !want, want)
		}
	}
	// Called without the registry's validation, the call itself refuses.
	res, err := tool.Call(context.Background(), nil, json.RawMessage(`{"code":"1","description":"run it"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(text(res), "description must be 5 to 10 words") || !strings.Contains(text(res), "got 2") {
		t.Errorf("call-time refusal: %s", text(res))
	}
}
