package e2e

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// runCLI runs the binary to completion and returns stdout, stderr and the
// exit code.
func runCLI(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := command(env, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func TestToolsCommandFollowsTheSurface(t *testing.T) {
	dir := t.TempDir()
	out, stderr, code := runCLI(t, []string{testTools}, "tools", "--workdir", dir, "--surface", "plan", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var list rpc.ListToolsResult
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	found := false
	for _, tl := range list.Tools {
		found = found || tl.Name == "test_echo"
		if tl.Tier != "read" {
			t.Errorf("plan lists %s (%s)", tl.Name, tl.Tier)
		}
	}
	if !found {
		t.Errorf("plan lacks test_echo: %s", out)
	}
	out, _, _ = runCLI(t, []string{testTools}, "tools", "--workdir", dir)
	if !strings.Contains(out, "test_exec") || !strings.Contains(out, "exec") {
		t.Errorf("full table lacks test_exec:\n%s", out)
	}
	if _, stderr, code := runCLI(t, nil, "tools", "--workdir", dir, "--surface", "admin"); code == 0 || !strings.Contains(stderr, `unknown surface "admin"`) {
		t.Errorf("bad surface: %d %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, nil, "tools", "--workdir", dir+"/missing"); code != 1 || !strings.Contains(stderr, "pass an existing directory\n") {
		t.Errorf("missing workdir: %d %s", code, stderr)
	}
}

func TestCallCommandRunsOneTool(t *testing.T) {
	dir := t.TempDir()
	out, stderr, code := runCLI(t, []string{testTools}, "call", "--workdir", dir, "test_echo", `{"text":"one shot"}`)
	if code != 0 || out != "one shot\n" {
		t.Fatalf("exit %d, %q, %s", code, out, stderr)
	}
	out, _, code = runCLI(t, []string{testTools}, "call", "--workdir", dir, "--json", "test_echo", `{"text":"j"}`)
	var res orchestrator.Result
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.FirstText() != "j" {
		t.Fatalf("--json: exit %d, %q", code, out)
	}
	// No harness: a tool that needs one fails with a clear reason.
	out, _, code = runCLI(t, []string{testTools}, "call", "--workdir", dir, "test_ask", `{"question":"q"}`)
	if code != 1 || !strings.Contains(out, "no harness connected") {
		t.Fatalf("ask without a harness: exit %d, %q", code, out)
	}
	// A write-tier tool from the plan surface is refused.
	out, _, code = runCLI(t, []string{testTools}, "call", "--workdir", dir, "--surface", "plan", "test_write", `{"path":"a","content":"b"}`)
	if code != 1 || !strings.Contains(out, "not allowed on the plan surface") {
		t.Fatalf("write from plan: exit %d, %q", code, out)
	}
	if _, stderr, code := runCLI(t, nil, "call", "--workdir", dir, "x", `{oops`); code == 0 || !strings.Contains(stderr, "not valid JSON") {
		t.Fatalf("bad JSON: exit %d, %s", code, stderr)
	}
}

func TestConfigAndVersionCommands(t *testing.T) {
	out, stderr, code := runCLI(t, nil, "config")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"rpc:\n", "  listen: 127.0.0.1:7070\n", "runs:\n", "  idle_timeout: 1h0m0s\n", "  disconnect_grace: 30s\n", "log:\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("config lacks %q:\n%s", want, out)
		}
	}
	_, stderr, code = runCLI(t, nil, "config", "--config", writeConfig(t, "runs:\n  idle_timout: 1m\n"))
	if code == 0 || !strings.Contains(stderr, "idle_timout") {
		t.Errorf("unknown key: exit %d, %s", code, stderr)
	}
	out, _, code = runCLI(t, nil, "version")
	if code != 0 || !strings.HasPrefix(out, "berth ") {
		t.Errorf("version: %d %q", code, out)
	}
	if _, stderr, code := runCLI(t, nil, "frobnicate"); code != 2 || !strings.Contains(stderr, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: %d %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, nil, "serve", "--config", writeConfig(t, "rpc:\n  listen: \"\"\n")); code != 1 || !strings.Contains(stderr, "nothing to serve") {
		t.Errorf("serve with nothing to listen on: %d %s", code, stderr)
	}
}
