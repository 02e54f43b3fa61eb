package debug

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// Issue 12 item 2: what each operation takes and needs is in the schema
// (the model reads it in tools/list), and the registry refuses a call that
// breaks it, naming the operation and the field, before the tool runs.
func TestEachOperationsArgumentsAreCheckedByTheSchema(t *testing.T) {
	e := newEnv(t, "", nil)
	valid := map[string]any{"file": "a.py", "lines": []int{1}, "program": "a.py", "args": []string{"x"}, "port": 5678,
		"thread_id": 1, "frame_id": 0, "reference": 1, "expression": "x"}
	all := slices.Sorted(maps.Keys(valid))
	call := func(args map[string]any) string {
		raw, _ := json.Marshal(args)
		return e.call(string(raw)).FirstText()
	}
	for _, op := range operations {
		args := map[string]any{"operation": op.name}
		var takes, required []string
		for _, f := range op.fields {
			name, req := strings.CutSuffix(f, "!")
			takes = append(takes, name)
			if req {
				required = append(required, name)
				args[name] = valid[name]
			}
		}
		for _, name := range required {
			without := maps.Clone(args)
			delete(without, name)
			want := fmt.Sprintf("invalid arguments for debug: %s needs %q (", op.name, name)
			if got := call(without); !strings.HasPrefix(got, want) {
				t.Errorf("%s without %s: %q, want it to start %q", op.name, name, got, want)
			}
		}
		only := "no other arguments"
		if len(takes) > 0 {
			slices.Sort(takes)
			only = "only " + strings.Join(quoted(takes), ", ")
		}
		for _, name := range all {
			if slices.Contains(takes, name) {
				continue
			}
			with := maps.Clone(args)
			with[name] = valid[name]
			want := fmt.Sprintf("invalid arguments for debug: %s does not take %q (it takes %s). Fix the arguments and call again.", op.name, name, only)
			if got := call(with); got != want {
				t.Errorf("%s with %s:\n got %q\nwant %q", op.name, name, got, want)
			}
		}
	}
}

func quoted(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%q", n)
	}
	return out
}
