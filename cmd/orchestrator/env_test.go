//go:build berthtest

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BERTH_TOKEN and the variables env.drop names reach no process Berth
// starts: a tool's child prints its environment.
//
// Issue 11 item 6.
func TestEnvDropKeepsVariablesFromChildren(t *testing.T) {
	t.Setenv(testToolsEnv, "1")
	t.Setenv("BERTH_TOKEN", "the-token")
	t.Setenv("BERTH_TEST_SECRET", "the-secret")
	t.Setenv("BERTH_TEST_KEPT", "kept")
	cfg := filepath.Join(t.TempDir(), "berth.yaml")
	if err := os.WriteFile(cfg, []byte("env:\n  drop: [BERTH_TEST_SECRET]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := run([]string{"call", "--config", cfg, "--workdir", t.TempDir(), "test_exec", `{"argv":["env"]}`}, &out, &errOut); err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	env := out.String()
	if strings.Contains(env, "BERTH_TOKEN") || strings.Contains(env, "the-token") || strings.Contains(env, "BERTH_TEST_SECRET") {
		t.Fatalf("the child sees a dropped variable:\n%s", env)
	}
	if !strings.Contains(env, "BERTH_TEST_KEPT=kept") {
		t.Fatalf("the child lost a variable nobody dropped:\n%s", env)
	}
}

func TestEnvDropRefusesWhatIsNotAName(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "berth.yaml")
	if err := os.WriteFile(cfg, []byte("env:\n  drop: [\"A=b\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig(cfg); err == nil || !strings.Contains(err.Error(), `env.drop: "A=b" is not a variable name`) {
		t.Fatalf("got %v", err)
	}
}
