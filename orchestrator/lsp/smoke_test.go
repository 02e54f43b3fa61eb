package lsp

import "testing"

func TestSmoke(t *testing.T) {
	f := newFixture(t, "go", DefaultConfig())
	t.Log(f.ok(map[string]any{"action": "definition", "file": "main.go", "line": 11, "symbol": "g.Greet"}))
	t.Log(f.ok(map[string]any{"action": "references", "file": "greet/greet.go", "line": 21, "symbol": "Hello"}))
	t.Log(f.ok(map[string]any{"action": "hover", "file": "main.go", "line": 12, "symbol": "greet.Hello"}))
	t.Log(f.ok(map[string]any{"action": "status"}))
}
