package orchestrator_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/berth-dev/berth/orchestrator"
)

// keyedSchema is a tool schema in the built-in tools' style: an action
// enum, and what each action needs as an if/then/else chain.
func keyedSchema(t *testing.T) json.RawMessage {
	t.Helper()
	return orchestrator.Chain(map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []string{"action"},
		"properties": map[string]any{
			"action": map[string]any{"type": "string", "enum": []string{"get", "put", "find", "list"}},
			"id":     map[string]any{"type": "integer", "minimum": 1, "description": "the item's id, from list."},
			"value":  map[string]any{"type": "string", "minLength": 1, "maxLength": 5},
			"query":  map[string]any{"type": "string"},
			"tags":   map[string]any{"type": "array", "minItems": 1, "items": map[string]any{"type": "object", "required": []string{"name"}, "properties": map[string]any{"name": map[string]any{"type": "string", "description": "the tag"}}}},
		},
	}, "action",
		orchestrator.When{Values: []string{"get", "put"}, Then: map[string]any{"required": []string{"id"}}},
		orchestrator.When{Values: []string{"find"}, Then: map[string]any{
			"description": `pass "query" to search, or "tags" to filter`,
			"if":          map[string]any{"required": []string{"tags"}},
			"else":        map[string]any{"required": []string{"query"}},
		}},
		orchestrator.When{Values: []string{"list"}, Then: map[string]any{
			"properties": map[string]any{"action": map[string]any{}}, "additionalProperties": false,
		}},
	)
}

// Arguments are checked once, by the schema: a requirement of one action
// is worded with the action and names the field and what to pass, as are
// the plain keywords.
//
// Issue 12 item 2.
func TestSchemaValidatorWordsEachFailureWithItsAction(t *testing.T) {
	tool := fakeTool{
		spec: orchestrator.Spec{Name: "items", InputSchema: keyedSchema(t), ParallelSafe: true},
		call: func(context.Context, json.RawMessage) (*orchestrator.Result, error) {
			return orchestrator.Text("ran"), nil
		},
	}
	reg, run := newRegistry(t, provider{orchestrator.FeatureStructural, []orchestrator.Tool{tool}})
	for _, tc := range []struct{ args, want string }{
		{`{"action":"get"}`, `get needs "id" (the item's id, from list)`},
		{`{"action":"put","value":"x"}`, `put needs "id" (the item's id, from list)`},
		{`{"action":"find"}`, `find needs "query": pass "query" to search, or "tags" to filter`},
		{`{"action":"list","id":3}`, `list does not take "id" (it takes no other arguments)`},
		{`{"action":"list","id":3,"bogus":1}`, `list does not take "bogus", "id" (it takes no other arguments)`},
		{`{"action":"get","id":1,"bogus":1}`, `items does not take "bogus" (it takes only "action", "id", "query", "tags", "value")`},
		{`{}`, `items needs "action"`},
		{`{"action":"fly"}`, `"action" must be one of "get", "put", "find", "list" (got "fly")`},
		{`{"action":"get","id":"3"}`, `"id" must be an integer, not a string`},
		{`{"action":"get","id":0}`, `"id" must be at least 1 (got 0)`},
		{`{"action":"get","id":1,"value":""}`, `"value" must not be empty`},
		{`{"action":"get","id":1,"value":"abcdef"}`, `"value" must have at most 5 characters (got 6)`},
		{`{"action":"find","tags":[]}`, `"tags" must have at least 1 item(s) (got 0)`},
		{`{"action":"find","tags":[{}]}`, `"tags.0" needs "name" (the tag)`},
	} {
		res, err := reg.Call(context.Background(), run, orchestrator.SurfaceFull, "items", json.RawMessage(tc.args))
		if err != nil {
			t.Fatalf("%s: %v", tc.args, err)
		}
		want := "invalid arguments for items: " + tc.want + ". Fix the arguments and call again."
		if !res.IsError || res.FirstText() != want {
			t.Errorf("%s:\n got %q\nwant %q", tc.args, res.FirstText(), want)
		}
	}
	for _, args := range []string{`{"action":"get","id":1}`, `{"action":"find","tags":[{"name":"a"}]}`, `{"action":"find","query":"a"}`, `{"action":"list"}`} {
		res, err := reg.Call(context.Background(), run, orchestrator.SurfaceFull, "items", json.RawMessage(args))
		if err != nil || res.IsError {
			t.Errorf("%s: %+v %v, want it to run", args, res, err)
		}
	}
}

// A string refused by its field's pattern is worded with what the field
// takes, from its description, rather than with the regular expression
// (issue 24 item 18: eval's description rule is a pattern in its schema).
func TestSchemaPatternMismatchSaysWhatTheFieldTakes(t *testing.T) {
	schema := `{"type":"object","properties":{
	  "label":{"type":"string","pattern":"^\\s*\\S+(\\s+\\S+){1,2}\\s*$","description":"2-3 words naming the thing."},
	  "code":{"type":"string","pattern":"^[A-Z]+$"}},
	  "additionalProperties":false}`
	tool := fakeTool{
		spec: orchestrator.Spec{Name: "items", InputSchema: json.RawMessage(schema), ParallelSafe: true},
		call: func(context.Context, json.RawMessage) (*orchestrator.Result, error) {
			return orchestrator.Text("ran"), nil
		},
	}
	reg, run := newRegistry(t, provider{orchestrator.FeatureStructural, []orchestrator.Tool{tool}})
	for _, tc := range []struct{ args, want string }{
		{`{"label":"one"}`, `"label" must be 2-3 words naming the thing (got "one")`},
		{`{"label":"a b c d"}`, `"label" must be 2-3 words naming the thing (got "a b c d")`},
		{`{"code":"ab"}`, `"code" must match the pattern ^[A-Z]+$ (got "ab")`},
	} {
		res, err := reg.Call(context.Background(), run, orchestrator.SurfaceFull, "items", json.RawMessage(tc.args))
		if err != nil {
			t.Fatalf("%s: %v", tc.args, err)
		}
		want := "invalid arguments for items: " + tc.want + ". Fix the arguments and call again."
		if !res.IsError || res.FirstText() != want {
			t.Errorf("%s:\n got %q\nwant %q", tc.args, res.FirstText(), want)
		}
	}
	if res, err := reg.Call(context.Background(), run, orchestrator.SurfaceFull, "items", json.RawMessage(`{"label":"two words","code":"AB"}`)); err != nil || res.IsError {
		t.Errorf("valid arguments: %+v %v, want it to run", res, err)
	}
}
