package lsp

import (
	"encoding/json"
	"slices"
	"testing"
)

// Issue 12 item 4: lsp's actions are one table. Every row either runs a
// position request (capability, method, request and renderer) or runs by
// itself, and the schema's enum and per-action requirements are read off
// the table, so a row is all an action needs.
func TestActionsAreOneTable(t *testing.T) {
	seen := map[string]bool{}
	for _, act := range actionTable {
		if seen[act.name] {
			t.Errorf("%s: two rows", act.name)
		}
		seen[act.name] = true
		position := act.ask != nil
		if position == (act.run != nil) {
			t.Errorf("%s: a row has either ask (a position request) or run, not both or neither", act.name)
		}
		if position && (act.capability == nil || act.method == "" || act.needs != atPosition) {
			t.Errorf("%s: a position row names its capability, its method and needs atPosition", act.name)
		}
		if !position && (act.capability != nil || act.method != "" || act.list) {
			t.Errorf("%s: capability, method and list are for position rows", act.name)
		}
	}

	var schema struct {
		Properties struct {
			Action struct {
				Enum []string `json:"enum"`
			} `json:"action"`
		} `json:"properties"`
		link
	}
	if err := json.Unmarshal(lspSpec.InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	if got := schema.Properties.Action.Enum; !slices.Equal(got, actionNames()) {
		t.Errorf("the schema's actions %v, the table's %v", got, actionNames())
	}
	needed := map[string]string{} // action → its link's description
	for l := &schema.link; l != nil && l.If != nil; l = l.Else {
		values := l.If.Properties.Action.Enum
		if l.If.Properties.Action.Const != "" {
			values = []string{l.If.Properties.Action.Const}
		}
		for _, v := range values {
			needed[v] = l.Then.Description
		}
	}
	for _, act := range actionTable {
		want := ""
		if act.needs != nil {
			want = act.needs.then["description"].(string)
		}
		if needed[act.name] != want {
			t.Errorf("%s: the schema says it needs %q, the table %q", act.name, needed[act.name], want)
		}
	}
}

// link is a link of the schema's if/then/else chain, as far as the test
// reads it.
type link struct {
	If *struct {
		Properties struct {
			Action struct {
				Const string   `json:"const"`
				Enum  []string `json:"enum"`
			} `json:"action"`
		} `json:"properties"`
	} `json:"if"`
	Then struct {
		Description string `json:"description"`
	} `json:"then"`
	Else *link `json:"else"`
}
