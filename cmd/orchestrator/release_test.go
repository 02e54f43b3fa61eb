package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// A build without -tags berthtest, as a release is built, links no
// test-only tool (test_exec runs any command): neither the testtools
// package's symbols are in the binary nor a test_* tool in its list, even
// with BERTH_TEST_TOOLS=1 in its environment.
//
// Issue 12 item 4.
func TestReleaseBuildHasNoTestTools(t *testing.T) {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	bin := filepath.Join(t.TempDir(), "orchestrator")
	build := exec.Command(gobin, "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOFLAGS=") // no -tags from outside
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	nm, err := exec.Command(gobin, "tool", "nm", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool nm: %v\n%s", err, nm)
	}
	for _, line := range strings.Split(string(nm), "\n") {
		if strings.Contains(line, "internal/testtools") || strings.Contains(line, "test_exec") {
			t.Errorf("the release build has a test-only symbol: %s", line)
		}
	}

	list := exec.Command(bin, "tools", "--workdir", t.TempDir(), "--json")
	list.Env = append(os.Environ(), "BERTH_TEST_TOOLS=1")
	out, err := list.Output()
	if err != nil {
		t.Fatalf("tools: %v", err)
	}
	var tools struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	if err := json.Unmarshal(out, &tools); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(tools.Tools) == 0 {
		t.Fatalf("the release build lists no tools: %s", out)
	}
	for _, tl := range tools.Tools {
		if strings.HasPrefix(tl.Name, "test_") {
			t.Errorf("the release build lists %s", tl.Name)
		}
	}
}
