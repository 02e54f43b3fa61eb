package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConfigFileOverridesDefaults(t *testing.T) {
	c, err := loadConfig("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.RPC.Listen != "127.0.0.1:9999" || c.RPC.MaxMessageBytes != 1<<20 || c.Runs.IdleTimeout != 5*time.Minute ||
		c.Runs.DisconnectGrace != 0 || c.Log.Level != "debug" {
		t.Fatalf("got %+v", c)
	}
	if d := defaultConfig(); c.Runs.ReaperInterval != d.Runs.ReaperInterval || c.Runs.CallTimeout != d.Runs.CallTimeout {
		t.Fatalf("keys absent from the file lost their defaults: %+v", c.Runs)
	}
}

func TestConfigErrorsNameTheProblem(t *testing.T) {
	cases := map[string]string{
		"testdata/unknown-key.yaml":     "line 3: field idel_timeout not found",
		"testdata/unknown-section.yaml": "field rcp not found",
		"testdata/bad-duration.yaml":    "soon",
		"testdata/negative.yaml":        "runs.reaper_interval must be positive",
		"testdata/missing.yaml":         "no such file",
	}
	for file, want := range cases {
		_, err := loadConfig(file)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", file, err, want)
		}
	}
}

// The printed configuration has every section and loads back unchanged.
func TestPrintedConfigRoundTrips(t *testing.T) {
	def, err := loadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := writeConfig(&out, def); err != nil {
		t.Fatal(err)
	}
	keys, _, err := sections(def)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !strings.Contains(out.String(), "\n"+k+":") && !strings.HasPrefix(out.String(), k+":") {
			t.Errorf("section %s missing from:\n%s", k, out.String())
		}
	}
	if !strings.Contains(out.String(), "idle_timeout: 1h0m0s") {
		t.Errorf("durations are not printed as durations:\n%s", out.String())
	}
	file := filepath.Join(t.TempDir(), "berth.yaml")
	if err := os.WriteFile(file, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	again, err := loadConfig(file)
	if err != nil {
		t.Fatalf("the printed configuration does not load: %v", err)
	}
	var out2 bytes.Buffer
	if err := writeConfig(&out2, again); err != nil {
		t.Fatal(err)
	}
	if out.String() != out2.String() {
		t.Fatalf("round trip changed the configuration:\n%s\n---\n%s", out.String(), out2.String())
	}
}
