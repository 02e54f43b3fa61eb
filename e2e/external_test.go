package e2e

import (
	"os/exec"
	"strings"
	"testing"
)

// A harness written without Berth's code (Python's standard library only)
// drives the binary over stdio and WebSocket and checks the same
// behaviours; its failure fails this test.
func TestExternalClient(t *testing.T) {
	cmd := exec.Command("/usr/bin/python3", "external/client.py", binary)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("external/client.py: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "ok: every check passed") {
		t.Fatalf("external/client.py did not finish:\n%s", out)
	}
}
