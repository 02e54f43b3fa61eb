package lsp

import (
	"os/exec"
	"testing"
)

// TestRustAnalyzerEntry runs the rust entry as far as this machine allows:
// rust-analyzer cannot be installed here, but rustup's proxy may stand on
// the PATH under its name. Either way the answer names the missing half or
// the server's own complaint, never nothing.
func TestRustAnalyzerEntry(t *testing.T) {
	f := newFixture(t, "missing", DefaultConfig())
	hover := map[string]any{"action": "hover", "file": "rust/src/main.rs", "line": 1, "symbol": "main"}
	if _, err := exec.LookPath("rust-analyzer"); err != nil {
		contains(t, f.fails(t, hover), `rust-analyzer: executable "rust-analyzer" not found in the host enclosure`)
		return
	}
	text, isErr := f.call(t, "lsp", hover)
	if isErr {
		// rustup's proxy without the component: the start fails and says why.
		contains(t, text, "rust-analyzer did not initialize in rust: it exited with code", "its stderr:\n")
		contains(t, f.ok(t, map[string]any{"action": "status"}), "rust-analyzer for root rust: down")
		return
	}
	contains(t, text, "fn main()") // a real rust-analyzer
}
