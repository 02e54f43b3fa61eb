package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-dev/berth/enclosure"
)

func writeConfigFile(t *testing.T, text string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "berth.yaml")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// autoSkipsToHost builds the lookup from cfg, with driver in its table,
// and checks that "auto", which asks driver and cannot reach it, falls
// back to the host with a log line naming the driver and mention (the
// address it tried).
func autoSkipsToHost(t *testing.T, cfg *config, driver, mention string) {
	t.Helper()
	var log strings.Builder
	l := enclosures(cfg, slog.New(slog.NewTextHandler(&log, nil)))
	if l.Drivers[driver] == nil {
		t.Fatalf("lookup %+v", l)
	}
	enc, err := l.Find(context.Background(), enclosure.Spec{Driver: "auto"}, "conv")
	if err != nil || enc.Driver() != "host" || !strings.Contains(log.String(), "driver="+driver) || !strings.Contains(log.String(), mention) {
		t.Fatalf("auto without %s: %v, %v; log %q", driver, enc, err, log.String())
	}
}

// The docker and enclosure keys load into the lookup run/start uses.
//
// Issue 13 item 2.
func TestEnclosureKeysBuildTheLookup(t *testing.T) {
	sock := "unix://" + t.TempDir() + "/no-engine.sock"
	cfg, err := loadConfig(writeConfigFile(t, `
docker:
  host: `+sock+`
  user: "1000"
enclosure:
  auto: [docker]
  host_fallback: false
  path_map:
    - {berth: /berth/checkout, host: /home/u/src}
`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Docker.Host != sock || cfg.Docker.User != "1000" || cfg.Docker.Dial != "relay" || cfg.Enclosure.HostFallback ||
		len(cfg.Enclosure.PathMap) != 1 || cfg.Enclosure.PathMap[0].Host != "/home/u/src" {
		t.Fatalf("loaded %+v %+v", cfg.Docker, cfg.Enclosure)
	}
	var log strings.Builder
	l := enclosures(cfg, slog.New(slog.NewTextHandler(&log, nil)))
	if !l.NoHostFallback || len(l.Auto) != 1 || l.Drivers["docker"] == nil || l.Host.Driver() != "host" {
		t.Fatalf("lookup %+v", l)
	}
	// No engine answers there: auto skips it with a log line, and with
	// host_fallback false that is an error rather than the host.
	_, err = l.Find(context.Background(), enclosure.Spec{Driver: "auto"}, "conv")
	if !errors.Is(err, enclosure.ErrNotFound) || !strings.Contains(err.Error(), "did not answer") || !strings.Contains(log.String(), "no-engine.sock") {
		t.Fatalf("auto without an engine and no host fallback: %v; log %q", err, log.String())
	}
}

// By default a machine without an engine still runs on the host.
//
// Issue 13 item 2.
func TestEnclosureDefaultsFallBackToTheHost(t *testing.T) {
	cfg, err := loadConfig(writeConfigFile(t, "docker:\n  host: unix://"+t.TempDir()+"/none.sock\n"))
	if err != nil {
		t.Fatal(err)
	}
	l := enclosures(cfg, slog.New(slog.DiscardHandler))
	enc, err := l.Find(context.Background(), enclosure.Spec{Driver: "auto"}, "conv")
	if err != nil || enc.Driver() != "host" {
		t.Fatalf("auto without an engine: %v, %v", enc, err)
	}
}

// Issue 13 item 2.
func TestEnclosureKeyErrorsNameTheProblem(t *testing.T) {
	for text, want := range map[string]string{
		"docker:\n  dial: carrier-pigeon\n":                  `docker.dial "carrier-pigeon": use relay or netns`,
		"docker:\n  stdio: tty\n":                            `docker.stdio "tty": use socket or exec`,
		"kubernetes:\n  stdio: tty\n":                        `kubernetes.stdio "tty": use socket or exec`,
		"docker:\n  host: not-an-address\n":                  `docker.host "not-an-address"`,
		"enclosure:\n  auto: [podman]\n":                     `enclosure.auto: unknown driver "podman"`,
		"enclosure:\n  path_map: [{berth: rel, host: /x}]\n": "enclosure.path_map[0]",
	} {
		if _, err := loadConfig(writeConfigFile(t, text)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want %q", text, err, want)
		}
	}
}
