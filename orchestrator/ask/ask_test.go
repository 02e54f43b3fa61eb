package ask_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/ask"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// harness is the harness side of the protocol as ask_user sees it: it
// records each card and answers with reply.
type harness struct {
	reply func(ctx context.Context, q orchestrator.Question) (*orchestrator.Answer, error)

	mu    sync.Mutex
	cards []orchestrator.Question
}

func (h *harness) CallTool(context.Context, orchestrator.ToolCall) (json.RawMessage, error) {
	return nil, errors.New("not used by ask_user")
}

func (h *harness) Ask(ctx context.Context, q orchestrator.Question) (*orchestrator.Answer, error) {
	h.mu.Lock()
	h.cards = append(h.cards, q)
	h.mu.Unlock()
	return h.reply(ctx, q)
}

func (h *harness) last() orchestrator.Question {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cards[len(h.cards)-1]
}

func answer(outcome string, selected []string, text string) func(context.Context, orchestrator.Question) (*orchestrator.Answer, error) {
	return func(context.Context, orchestrator.Question) (*orchestrator.Answer, error) {
		return &orchestrator.Answer{Outcome: outcome, Selected: selected, Text: text}, nil
	}
}

// blockUntilCancelled is a human who never answers: it returns when the
// card's context ends, as the protocol layer does when it cancels.
func blockUntilCancelled(ctx context.Context, _ orchestrator.Question) (*orchestrator.Answer, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

type fixture struct {
	reg     *orchestrator.Registry
	metrics *metrics.Metrics
	h       *harness
}

func newFixture(t *testing.T, cfg ask.Config) *fixture {
	t.Helper()
	m := metrics.NewForTest()
	p, err := ask.New(cfg, m)
	if err != nil {
		t.Fatal(err)
	}
	reg := orchestrator.NewRegistry(m, time.Minute)
	reg.Add(p)
	return &fixture{reg: reg, metrics: m, h: &harness{reply: answer("skipped", nil, "")}}
}

func (f *fixture) run(t *testing.T, id, conversation string, questions bool) *orchestrator.Run {
	t.Helper()
	run := orchestrator.NewRun(id, conversation, t.TempDir(), host.New(), f.h,
		map[string]bool{orchestrator.FeatureQuestions: questions})
	t.Cleanup(func() { run.End("test") })
	return run
}

func (f *fixture) call(t *testing.T, run *orchestrator.Run, args string) *orchestrator.Result {
	t.Helper()
	res, err := f.reg.Call(context.Background(), run, orchestrator.SurfaceReadonly, "ask_user", json.RawMessage(args))
	if err != nil {
		t.Fatalf("ask_user %s: Go error %v", args, err)
	}
	return res
}

func TestBadCardsAreRefusedBeforeReachingTheHarness(t *testing.T) {
	f := newFixture(t, ask.DefaultConfig())
	run := f.run(t, "r1", "c1", true)
	for _, tc := range []struct{ name, args, want string }{
		{"missing question", `{"allow_free_text":true}`, `ask_user needs "question" (What to ask, as one clear question)`},
		{"unknown field", `{"question":"q","allow_free_text":true,"colour":1}`, "colour"},
		{"wrong type", `{"question":"q","multi_select":"yes","options":[{"label":"a"}]}`, "multi_select"},
		{"blank question", `{"question":"  \n","allow_free_text":true}`, "question is empty"},
		{"empty label", `{"question":"q","options":[{"label":"a"},{"label":" "}]}`, "option 2 has an empty label"},
		{"duplicate labels", `{"question":"q","options":[{"label":"Yes"},{"label":"no"},{"label":"yes "}]}`, `options 1 and 3 have the same label "yes"`},
		{"multi_select without options", `{"question":"q","multi_select":true,"allow_free_text":true}`, "multi_select is true but there are no options"},
		{"no way to answer", `{"question":"q"}`, "give options, or set allow_free_text"},
		{"no way to answer, empty options", `{"question":"q","options":[]}`, "give options, or set allow_free_text"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := f.call(t, run, tc.args)
			if !res.IsError || !strings.Contains(res.FirstText(), tc.want) {
				t.Fatalf("got %+v, want an error containing %q", res, tc.want)
			}
		})
	}
	if len(f.h.cards) != 0 {
		t.Fatalf("the harness saw %d cards for invalid arguments", len(f.h.cards))
	}
}

func TestOutcomes(t *testing.T) {
	const card = `{"question":" Which database? ","context":"the schema depends on it","options":[{"label":"Postgres","description":"managed"},{"label":"SQLite"}],"allow_free_text":true}`
	const multi = `{"question":"Which targets?","options":[{"label":"linux"},{"label":"mac"}],"multi_select":true}`
	for _, tc := range []struct {
		name    string
		args    string
		reply   func(context.Context, orchestrator.Question) (*orchestrator.Answer, error)
		isError bool
		want    []string
	}{
		{"one option", card, answer("answered", []string{"Postgres"}, ""), false,
			[]string{"answered question #1", `Selected: "Postgres"`}},
		{"option and text", card, answer("answered", []string{"SQLite"}, " just for tests "), false,
			[]string{`Selected: "SQLite"`, "Text: just for tests"}},
		{"text only", card, answer("answered", nil, "MySQL, actually"), false,
			[]string{"Text: MySQL, actually"}},
		{"several on a multi-select card", multi, answer("answered", []string{"linux", "mac"}, ""), false,
			[]string{`Selected: "linux", "mac"`}},
		{"skipped", card, answer("skipped", nil, ""), false,
			[]string{"skipped question #1", "assumption", "do not ask this question again"}},
		{"label not on the card", card, answer("answered", []string{"Oracle"}, ""), true,
			[]string{`selected "Oracle", which is not one of the card's options`, "do not ask"}},
		{"several on a single-select card", card, answer("answered", []string{"Postgres", "SQLite"}, ""), true,
			[]string{"selected 2 options on a card that allows only one"}},
		{"empty answer", card, answer("answered", nil, " "), true,
			[]string{"selected nothing and wrote nothing"}},
		{"unknown outcome", card, answer("maybe", nil, ""), true,
			[]string{`unknown outcome "maybe"`}},
		{"no human connected", card, func(context.Context, orchestrator.Question) (*orchestrator.Answer, error) {
			return nil, errors.New("no human is connected to this conversation")
		}, true, []string{"failed at once", "no human is connected to this conversation", "assumption"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, ask.DefaultConfig())
			f.h.reply = tc.reply
			res := f.call(t, f.run(t, "r1", "c1", true), tc.args)
			if res.IsError != tc.isError {
				t.Fatalf("isError = %v, want %v: %s", res.IsError, tc.isError, res.FirstText())
			}
			for _, w := range tc.want {
				if !strings.Contains(res.FirstText(), w) {
					t.Errorf("result %q lacks %q", res.FirstText(), w)
				}
			}
		})
	}
}

func TestCardReachesTheHarnessCleaned(t *testing.T) {
	f := newFixture(t, ask.Config{Timeout: 3 * time.Minute})
	f.call(t, f.run(t, "r1", "c1", true), `{"question":" Ship it? ","context":" release day ","options":[{"label":" yes ","description":" now "},{"label":"no"}],"multi_select":false}`)
	got := f.h.last()
	want := orchestrator.Question{
		Number: 1, Question: "Ship it?", Context: "release day",
		Options: []orchestrator.Option{{Label: "yes", Description: "now"}, {Label: "no"}},
		Timeout: 3 * time.Minute,
	}
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if string(gj) != string(wj) || got.Timeout != want.Timeout {
		t.Fatalf("card\n got %s (timeout %s)\nwant %s (timeout %s)", gj, got.Timeout, wj, want.Timeout)
	}
}

func TestTimeoutCancelsTheCardAndFails(t *testing.T) {
	f := newFixture(t, ask.Config{Timeout: 100 * time.Millisecond})
	cancelled := make(chan error, 1)
	f.h.reply = func(ctx context.Context, q orchestrator.Question) (*orchestrator.Answer, error) {
		if d, ok := ctx.Deadline(); !ok || time.Until(d) > q.Timeout {
			t.Errorf("the card's context has no deadline within its timeout (%v, %v)", d, ok)
		}
		_, err := blockUntilCancelled(ctx, q)
		cancelled <- err
		return nil, err
	}
	start := time.Now()
	res := f.call(t, f.run(t, "r1", "c1", true), `{"question":"q","allow_free_text":true}`)
	if !res.IsError || !strings.Contains(res.FirstText(), "No answer to question #1 within 100ms") ||
		!strings.Contains(res.FirstText(), "do not ask this question again") {
		t.Fatalf("got %+v", res)
	}
	if err := <-cancelled; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the harness saw %v, want the deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("timeout took %s", d)
	}
	if v := testutil.ToFloat64(f.metrics.QuestionsPending); v != 0 {
		t.Fatalf("berth_questions_pending = %v after the timeout", v)
	}
}

func TestRunEndWithdrawsTheCard(t *testing.T) {
	f := newFixture(t, ask.DefaultConfig())
	f.h.reply = blockUntilCancelled
	run := f.run(t, "r1", "c1", true)
	go func() {
		waitFor(t, func() bool { return testutil.ToFloat64(f.metrics.QuestionsPending) == 1 })
		run.End("stopped")
	}()
	res := f.call(t, run, `{"question":"q","allow_free_text":true}`)
	if !res.IsError || !strings.Contains(res.FirstText(), "withdrawn") {
		t.Fatalf("got %+v", res)
	}
}

func TestTwoQuestionsWaitAtOnce(t *testing.T) {
	f := newFixture(t, ask.DefaultConfig())
	release := make(chan struct{})
	f.h.reply = func(ctx context.Context, q orchestrator.Question) (*orchestrator.Answer, error) {
		<-release
		return &orchestrator.Answer{Outcome: "answered", Text: q.Question}, nil
	}
	run := f.run(t, "r1", "c1", true)
	var wg sync.WaitGroup
	results := make([]*orchestrator.Result, 2)
	for i := range results {
		wg.Go(func() { results[i] = f.call(t, run, `{"question":"q`+string(rune('a'+i))+`","allow_free_text":true}`) })
	}
	waitFor(t, func() bool { return testutil.ToFloat64(f.metrics.QuestionsPending) == 2 })
	close(release)
	wg.Wait()
	numbers := map[string]bool{}
	for _, r := range results {
		if r.IsError {
			t.Fatalf("got %+v", r)
		}
		numbers[strings.Fields(r.FirstText())[4]] = true
	}
	if !numbers["#1."] || !numbers["#2."] {
		t.Fatalf("two concurrent cards were numbered %v, want #1 and #2", numbers)
	}
	if v := testutil.ToFloat64(f.metrics.QuestionsPending); v != 0 {
		t.Fatalf("berth_questions_pending = %v", v)
	}
}

func TestCardsAreNumberedPerConversation(t *testing.T) {
	f := newFixture(t, ask.DefaultConfig())
	const args = `{"question":"q","allow_free_text":true}`
	a1, a2 := f.run(t, "a1", "conv-a", true), f.run(t, "a2", "conv-a", true)
	b := f.run(t, "b", "conv-b", true)
	n1, n2 := f.run(t, "n1", "", true), f.run(t, "n2", "", true)
	steps := []struct {
		run  *orchestrator.Run
		want int
	}{{a1, 1}, {a1, 2}, {a2, 3}, {b, 1}, {n1, 1}, {n2, 1}, {n1, 2}, {b, 2}}
	for i, s := range steps {
		f.call(t, s.run, args)
		if got := f.h.last().Number; got != s.want {
			t.Fatalf("step %d (run %s, conversation %q): card #%d, want #%d", i, s.run.ID, s.run.ConversationID, got, s.want)
		}
	}
}

func TestOnlyRunsWithQuestionsSeeAskUser(t *testing.T) {
	f := newFixture(t, ask.DefaultConfig())
	off := f.run(t, "off", "c1", false)
	if specs := f.reg.List(off, orchestrator.SurfaceFull); len(specs) != 0 {
		t.Fatalf("run without questions lists %v", specs)
	}
	res := f.call(t, off, `{"question":"q","allow_free_text":true}`)
	if !res.IsError || !strings.Contains(res.FirstText(), `feature "questions" is off`) {
		t.Fatalf("got %+v", res)
	}
	on := f.run(t, "on", "c1", true)
	specs := f.reg.List(on, orchestrator.SurfaceReadonly)
	if len(specs) != 1 || specs[0].Name != "ask_user" || specs[0].Tier != orchestrator.Read || !specs[0].ParallelSafe {
		t.Fatalf("run with questions lists %+v", specs)
	}
	on.SetFeatures(map[string]bool{orchestrator.FeatureQuestions: false})
	if specs := f.reg.List(on, orchestrator.SurfaceFull); len(specs) != 0 {
		t.Fatalf("after turning questions off the run lists %v", specs)
	}
}

func TestNoHarnessFailsAtOnce(t *testing.T) {
	f := newFixture(t, ask.DefaultConfig())
	run := orchestrator.NewRun("r", "c", t.TempDir(), host.New(), nil, map[string]bool{orchestrator.FeatureQuestions: true})
	defer run.End("test")
	res := f.call(t, run, `{"question":"q","allow_free_text":true}`)
	if !res.IsError || !strings.Contains(res.FirstText(), "no harness connection") {
		t.Fatalf("got %+v", res)
	}
}

func TestConfig(t *testing.T) {
	if got := ask.DefaultConfig().Timeout; got != 10*time.Minute {
		t.Fatalf("default questions.timeout = %s, want 10m", got)
	}
	if _, err := ask.New(ask.Config{}, metrics.NewForTest()); err == nil || !strings.Contains(err.Error(), "questions.timeout") {
		t.Fatalf("zero timeout: got %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Error("condition not met within 10s")
}
