package structural

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// resolveTool is resolve: it writes a staged change, all or none, or
// drops it.
type resolveTool struct{ p *Provider }

type resolveArgs struct {
	EditID string `json:"edit_id"`
	Action string `json:"action"`
}

func (r resolveTool) Spec() orchestrator.Spec {
	return orchestrator.Spec{
		Name: "resolve",
		Tier: orchestrator.Write,
		Description: "Accepts or discards a change staged by ast_edit. edit_id is from the (proposed) result; action is accept or discard. " +
			"accept first checks that every file still has the content it had when the change was staged: if any changed, nothing is written " +
			"and the changed files are named (stage the change again); otherwise every file is written, all or none, and the result lists the problems " +
			"the write introduced, as the language servers report them (as lsp_rename does). discard drops the change.",
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "edit_id": {"type": "string", "description": "from the (proposed) result, e.g. edit_1"},
    "action": {"type": "string", "enum": ["accept", "discard"]}
  },
  "required": ["edit_id", "action"],
  "additionalProperties": false
}`),
		ParallelSafe: true,
	}
}

func (r resolveTool) Call(ctx context.Context, run *orchestrator.Run, raw json.RawMessage) (*orchestrator.Result, error) {
	var a resolveArgs
	if res := decode(raw, &a); res != nil {
		return res, nil
	}
	st := stateOf(run, r.p.cfg.CacheBytes)
	e, err := st.take(a.EditID)
	if err != nil {
		return orchestrator.Errorf("%v", err), nil
	}
	if a.Action == "discard" {
		st.done(e.id, "discarded")
		return orchestrator.Textf("discarded %s: %s in %s dropped; nothing was written", e.id, text.Count(e.replacements, "replacement"), text.Count(len(e.files), "file")), nil
	}
	root, err := run.Root()
	if err != nil {
		st.putBack(e)
		return nil, err
	}
	var names []string
	for _, f := range e.files {
		names = append(names, f.rel)
	}
	obs := r.p.observer()
	if obs != nil {
		// Best effort, as a harness's files/willWrite: a baseline it
		// cannot take only lets old problems show as new.
		_ = obs.WillWrite(ctx, run, names)
	}
	werr := r.p.Writer.Apply(root, e.changes())
	for _, f := range e.files {
		st.cache.forget(f.path)
	}
	var conflict *workspace.ConflictError
	switch {
	case errors.As(werr, &conflict):
		st.done(e.id, "rejected: files changed on disk")
		return orchestrator.Errorf("%s was rejected and nothing was written: %d file(s) changed since the change was staged: %s. Call ast_edit again to stage it against the current files.",
			e.id, len(conflict.Paths), strings.Join(conflict.Paths, ", ")), nil
	case werr != nil:
		st.putBack(e)
		return orchestrator.Errorf("%s was not applied: %v. It is still staged: call resolve again, or discard it.", e.id, werr), nil
	}
	st.done(e.id, "accepted")
	shown := make([]string, len(names))
	for i, n := range names {
		shown[i] = text.Path(n)
	}
	return orchestrator.Textf("accepted %s: wrote %s in %s: %s\n%s", e.id, text.Count(e.replacements, "replacement"), text.Count(len(e.files), "file"), strings.Join(shown, ", "),
		checkWrite(ctx, run, obs, names)), nil
}

// checkWrite is what the write observer says of the files just written:
// the problems the write introduced, or why it could not tell. Silence is
// never clean.
func checkWrite(ctx context.Context, run *orchestrator.Run, obs orchestrator.WriteObserver, paths []string) string {
	if obs == nil {
		return "Diagnostics unknown: no language-server side is connected, so the write was not checked."
	}
	rep, err := obs.DidWrite(ctx, run, paths)
	switch {
	case err != nil:
		return fmt.Sprintf("Diagnostics unknown: checking the write failed: %v", err)
	case rep == nil || rep.Text == "":
		return "Diagnostics unknown: the language-server side gave no report."
	}
	return rep.Text
}

// observer is the registry's write observer, or nil.
func (p *Provider) observer() orchestrator.WriteObserver {
	if p.Observers == nil {
		return nil
	}
	return p.Observers.WriteObserver()
}
