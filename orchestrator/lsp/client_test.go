package lsp

import (
	"testing"

	"go.lsp.dev/protocol"
)

// TestConfigurationAnswersEachItemWithTheSectionItNames checks Berth's
// answer to workspace/configuration, which images/lsp/warm shares (what
// a client answers is part of gopls's cache keys): a dotted section is
// looked up in the settings, no section gets them all, and a section
// that is not there, or settings that are not set, get null.
func TestConfigurationAnswersEachItemWithTheSectionItNames(t *testing.T) {
	sec := func(s string) *string { return &s }
	settings := map[string]any{"gopls": map[string]any{"ui": map[string]any{"semanticTokens": true}, "hints": "x"}}
	items := []protocol.ConfigurationItem{
		{Section: sec("gopls.ui")},
		{},
		{Section: sec("")},
		{Section: sec("gopls.hints.deeper")},
		{Section: sec("pylsp")},
	}
	want := []string{
		`{"semanticTokens":true}`,
		`{"gopls":{"hints":"x","ui":{"semanticTokens":true}}}`,
		`{"gopls":{"hints":"x","ui":{"semanticTokens":true}}}`,
		`null`,
		`null`,
	}
	got := ConfigurationAnswer(settings, items)
	if len(got) != len(want) {
		t.Fatalf("%d answers for %d items", len(got), len(items))
	}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Errorf("item %d: %s, want %s", i, got[i], want[i])
		}
	}
	if got := ConfigurationAnswer(nil, items[:1]); string(got[0]) != "null" {
		t.Errorf("no settings: %s, want null", got[0])
	}
}
