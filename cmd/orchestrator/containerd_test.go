package main

import (
	"strings"
	"testing"
)

// The containerd keys load into the lookup: the driver is in the table,
// and "auto" asks it when enclosure.auto lists it; one that does not
// answer is skipped with a log line.
//
// Issue 14 item 1.
func TestContainerdKeysBuildTheLookup(t *testing.T) {
	sock := t.TempDir() + "/no-containerd.sock"
	cfg, err := loadConfig(writeConfigFile(t, `
containerd:
  address: `+sock+`
  namespace: k8s.io
enclosure:
  auto: [containerd]
`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Containerd.Address != sock || cfg.Containerd.Namespace != "k8s.io" {
		t.Fatalf("loaded %+v", cfg.Containerd)
	}
	autoSkipsToHost(t, cfg, "containerd", sock)
	// The defaults: containerd's own socket and namespace, and auto asks
	// only docker.
	cfg, err = loadConfig(writeConfigFile(t, "log:\n  level: info\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Containerd.Address != "/run/containerd/containerd.sock" || cfg.Containerd.Namespace != "default" || strings.Join(cfg.Enclosure.Auto, ",") != "docker" {
		t.Fatalf("defaults %+v, auto %v", cfg.Containerd, cfg.Enclosure.Auto)
	}
}

// Issue 14 item 1.
func TestContainerdKeyErrorsNameTheProblem(t *testing.T) {
	for text, want := range map[string]string{
		"containerd:\n  address: relative.sock\n": `containerd.address "relative.sock": use the absolute path`,
		"containerd:\n  namespace: \"a b\"\n":     `containerd.namespace "a b"`,
		"containerd:\n  namespace: moby\n":        `attach to them with the docker driver`,
	} {
		if _, err := loadConfig(writeConfigFile(t, text)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want %q", text, err, want)
		}
	}
}
