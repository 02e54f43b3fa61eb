package vibe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/orchestrator"
)

// All five tools are tier read (the gate belongs to the worker's own tools,
// where the editing happens, so a worker is told its surface: surfaceEnv)
// and parallel-safe: the pool has its own lock, and waiting on two workers
// at once must not queue.

// listSummary is how many characters of a last result vibe_list shows.
const listSummary = 120

type spawnTool struct{ p *Provider }

func (t spawnTool) Spec() orchestrator.Spec {
	return orchestrator.Spec{
		Name: "vibe_spawn", Tier: orchestrator.Read, ParallelSafe: true,
		Description: `Start a background worker on an assignment and return at once with its id (w1, w2, ...). The worker keeps running while you do other work.
Pass brief (the full assignment: what to do, where, how to know it is done), label (a short name for lists) and tier: "fast" (default; mechanical work with a clear spec) or "good" (design, judgement, or checking a fast worker's output).
Then use vibe_wait to get its result, vibe_send to add instructions, vibe_kill to stop it, vibe_list to see all workers.`,
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "brief": {"type": "string", "description": "The full assignment."},
    "label": {"type": "string", "maxLength": 80, "description": "Short name shown in vibe_list."},
    "tier": {"type": "string", "enum": ["fast", "good"], "description": "fast (default) or good."}
  },
  "required": ["brief", "label"],
  "additionalProperties": false
}`),
	}
}

func (t spawnTool) Call(ctx context.Context, run *orchestrator.Run, raw json.RawMessage) (*orchestrator.Result, error) {
	var a struct{ Brief, Label, Tier string }
	if err := json.Unmarshal(raw, &a); err != nil {
		return orchestrator.Errorf("vibe_spawn: %v", err), nil
	}
	brief, label := strings.TrimSpace(a.Brief), strings.TrimSpace(a.Label)
	if brief == "" {
		return orchestrator.Errorf("vibe_spawn: brief is empty: write the worker's full assignment"), nil
	}
	if label == "" {
		return orchestrator.Errorf("vibe_spawn: label is empty: give the worker a short name for vibe_list"), nil
	}
	tier := a.Tier
	if tier == "" {
		tier = tierFast
	}
	w, err := t.p.pool(run).spawn(tier, label, brief, orchestrator.SurfaceOf(ctx))
	if err != nil {
		return orchestrator.Errorf("vibe_spawn: %v", err), nil
	}
	return orchestrator.Textf("Spawned worker %s (%q, tier %s); it is running. Use vibe_wait {\"worker_id\": %q} for its result.", w.id, label, tier, w.id), nil
}

// workerArg is the worker_id argument shared by send, wait and kill.
const workerArg = `"worker_id": {"type": "string", "description": "The id vibe_spawn returned (w1, w2, ...)."}`

// lookup parses the arguments and finds the worker they name.
func lookup(p *Provider, run *orchestrator.Run, tool string, raw json.RawMessage, into any) (*pool, *worker, *orchestrator.Result) {
	if err := json.Unmarshal(raw, into); err != nil {
		return nil, nil, orchestrator.Errorf("%s: %v", tool, err)
	}
	var id struct {
		WorkerID string `json:"worker_id"`
	}
	_ = json.Unmarshal(raw, &id)
	pl := p.pool(run)
	w, err := pl.find(strings.TrimSpace(id.WorkerID))
	if err != nil {
		return nil, nil, orchestrator.Errorf("%s: %v", tool, err)
	}
	return pl, w, nil
}

type sendTool struct{ p *Provider }

func (t sendTool) Spec() orchestrator.Spec {
	return orchestrator.Spec{
		Name: "vibe_send", Tier: orchestrator.Read, ParallelSafe: true,
		Description: `Add a message to a worker's assignment and rerun it: a running attempt is stopped first, and the worker starts again on its brief plus every message sent so far. Pass worker_id and message. Returns at once; use vibe_wait for the new result.`,
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    ` + workerArg + `,
    "message": {"type": "string", "description": "What to add or change."}
  },
  "required": ["worker_id", "message"],
  "additionalProperties": false
}`),
	}
}

func (t sendTool) Call(ctx context.Context, run *orchestrator.Run, raw json.RawMessage) (*orchestrator.Result, error) {
	var a struct{ Message string }
	pl, w, bad := lookup(t.p, run, "vibe_send", raw, &a)
	if bad != nil {
		return bad, nil
	}
	msg := strings.TrimSpace(a.Message)
	if msg == "" {
		return orchestrator.Errorf("vibe_send: message is empty: write what the worker should do differently"), nil
	}
	stopped, err := pl.send(w, msg, orchestrator.SurfaceOf(ctx))
	if err != nil {
		return orchestrator.Errorf("vibe_send: %v", err), nil
	}
	v := pl.view(w)
	how := "it had settled, so it was started again"
	if stopped {
		how = "its running attempt was stopped and it was started again"
	}
	return orchestrator.Textf("Sent message %d to %s; %s on the brief plus %d message(s). Use vibe_wait for the new result.", v.messages, v.name(), how, v.messages), nil
}

type waitTool struct{ p *Provider }

func (t waitTool) Spec() orchestrator.Spec {
	maxSec := int(t.p.cfg.WaitMax / time.Second)
	return orchestrator.Spec{
		Name: "vibe_wait", Tier: orchestrator.Read, ParallelSafe: true,
		Description: fmt.Sprintf(`Wait until a worker settles (succeeded, failed or killed) or timeout_seconds pass (default %d, at most %d), and say which. A settled worker's report has its result (its stdout, capped) or, for a failure, its exit status and stderr. If it is still running, call again, steer it with vibe_send, or vibe_kill it.`,
			int(t.p.cfg.WaitDefault/time.Second), maxSec),
		InputSchema: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    %s,
    "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": %d, "description": "How long to wait."}
  },
  "required": ["worker_id"],
  "additionalProperties": false
}`, workerArg, maxSec)),
		Timeout: t.p.cfg.WaitMax + time.Minute,
	}
}

func (t waitTool) Call(ctx context.Context, run *orchestrator.Run, raw json.RawMessage) (*orchestrator.Result, error) {
	var a struct {
		TimeoutSeconds int `json:"timeout_seconds"`
	}
	pl, w, bad := lookup(t.p, run, "vibe_wait", raw, &a)
	if bad != nil {
		return bad, nil
	}
	timeout := t.p.cfg.WaitDefault
	if a.TimeoutSeconds > 0 {
		timeout = time.Duration(a.TimeoutSeconds) * time.Second
	}
	if v := pl.view(w); v.status == statusRunning {
		if res := frozen(ctx, pl, v); res != nil {
			return res, nil
		}
	}
	settled, err := pl.wait(ctx, w, timeout)
	v := pl.view(w)
	switch {
	case err != nil:
		return orchestrator.Errorf("vibe_wait was cancelled before %s settled (%v); %s", w.id, err, v.report()), nil
	case !settled:
		if res := frozen(ctx, pl, v); res != nil {
			return res, nil
		}
		return orchestrator.Textf("Still running: %s has not settled after waiting %s (this attempt has run %s). Call vibe_wait again, steer it with vibe_send, or stop it with vibe_kill.", v.name(), timeout, round(v.elapsed)), nil
	}
	return orchestrator.Text("Settled: " + v.report()), nil
}

// frozen is vibe_wait's answer for a running worker whose container is
// paused (or stopped, or removed): it is not "still running", it cannot
// settle until the container is unpaused, and waiting for it would only
// wait out the timeout (issue 27 item 3). nil while the container runs,
// or when its engine does not say (a worker may run on then).
func frozen(ctx context.Context, pl *pool, v view) *orchestrator.Result {
	down := enclosure.Check(ctx, pl.enc)
	if !errors.Is(down, enclosure.ErrPaused) && !errors.Is(down, enclosure.ErrGone) {
		return nil
	}
	return orchestrator.Errorf("vibe_wait: %s cannot settle: %s", v.name(), enclosure.Say(down)).Classed(down)
}

type killTool struct{ p *Provider }

func (t killTool) Spec() orchestrator.Spec {
	return orchestrator.Spec{
		Name: "vibe_kill", Tier: orchestrator.Read, ParallelSafe: true,
		Description: `Stop a worker for good: its process and everything it started are killed, its output is dropped and its slot is freed. Pass worker_id. A killed worker cannot be resumed; spawn a new one instead.`,
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {` + workerArg + `},
  "required": ["worker_id"],
  "additionalProperties": false
}`),
	}
}

func (t killTool) Call(_ context.Context, run *orchestrator.Run, raw json.RawMessage) (*orchestrator.Result, error) {
	var a struct{}
	pl, w, bad := lookup(t.p, run, "vibe_kill", raw, &a)
	if bad != nil {
		return bad, nil
	}
	if !pl.kill(w) {
		return orchestrator.Textf("%s was already killed.", w.id), nil
	}
	return orchestrator.Textf("Killed %s.", pl.view(w).name()), nil
}

type listTool struct{ p *Provider }

func (t listTool) Spec() orchestrator.Spec {
	return orchestrator.Spec{
		Name: "vibe_list", Tier: orchestrator.Read, ParallelSafe: true,
		Description: `List this run's workers: id, label, tier, status (running, succeeded, failed, killed), elapsed time of the current or last attempt, and the start of the last result. Takes no arguments. Use vibe_wait for a worker's full result.`,
		InputSchema: json.RawMessage(orchestrator.NoArgs),
	}
}

func (t listTool) Call(_ context.Context, run *orchestrator.Run, _ json.RawMessage) (*orchestrator.Result, error) {
	views := t.p.pool(run).list()
	if len(views) == 0 {
		return orchestrator.Text("No workers in this run; start one with vibe_spawn."), nil
	}
	var b strings.Builder
	counts := map[string]int{}
	for _, v := range views {
		counts[v.status]++
		fmt.Fprintf(&b, "\n%s  %q  %s  %s  %s  %s", v.id, v.label, v.tier, v.status, round(v.elapsed), v.summary(listSummary))
	}
	head := fmt.Sprintf("%d worker(s): %d running, %d succeeded, %d failed, %d killed.",
		len(views), counts[statusRunning], counts[statusSucceeded], counts[statusFailed], counts[statusKilled])
	return orchestrator.Text(head + b.String()), nil
}
