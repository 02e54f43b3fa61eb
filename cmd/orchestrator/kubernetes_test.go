package main

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/klog/v2"

	"github.com/berth-dev/berth/enclosure/kubernetes"
)

// The kubernetes keys load into the lookup: the driver is in the table,
// and "auto" asks it when enclosure.auto lists it; a cluster Berth cannot
// reach (here: a kubeconfig that is missing) is skipped with a log line.
//
// Issue 16 item 1.
func TestKubernetesKeysBuildTheLookup(t *testing.T) {
	missing := t.TempDir() + "/no-kubeconfig"
	cfg, err := loadConfig(writeConfigFile(t, `
kubernetes:
  kubeconfig: `+missing+`
  namespace: sandboxes
  container: work
  sidecar: true
  workspace_volume:
    name: workspace
    path: /workspace
enclosure:
  auto: [kubernetes]
`))
	if err != nil {
		t.Fatal(err)
	}
	k := cfg.Kubernetes
	if k.Kubeconfig != missing || k.Namespace != "sandboxes" || k.Container != "work" || !k.Sidecar || k.Workspace != (kubernetes.Volume{Name: "workspace", Path: "/workspace"}) {
		t.Fatalf("loaded %+v", k)
	}
	// The volume's name alone: Berth mounts it where the pods do.
	short, err := loadConfig(writeConfigFile(t, "kubernetes:\n  workspace_volume: workspace\n"))
	if err != nil || short.Kubernetes.Workspace != (kubernetes.Volume{Name: "workspace"}) {
		t.Fatalf("workspace_volume: workspace: %+v, %v", short, err)
	}
	autoSkipsToHost(t, cfg, "kubernetes", missing)
}

// client-go's log (klog) goes to Berth's log, not to stderr in klog's
// own format.
//
// Issue 16 item 1.
func TestClientGoLogsThroughBerthsLog(t *testing.T) {
	var log strings.Builder
	enclosures(&config{}, slog.New(slog.NewTextHandler(&log, nil)))
	klog.ErrorS(errors.New("probe"), "an error occurred forwarding 1234 -> 8080")
	klog.Flush()
	if got := log.String(); !strings.Contains(got, "level=ERROR") || !strings.Contains(got, "from=client-go") || !strings.Contains(got, "forwarding 1234") {
		t.Fatalf("Berth's log: %q", got)
	}
}

// Issue 16 item 1.
func TestKubernetesKeyErrorsNameTheProblem(t *testing.T) {
	for text, want := range map[string]string{
		"kubernetes:\n  kubeconfig: relative/config\n":                    `kubernetes.kubeconfig "relative/config": use an absolute path`,
		"kubernetes:\n  namespace: Not_A_Namespace\n":                     `kubernetes.namespace "Not_A_Namespace"`,
		"kubernetes:\n  workspace_volume:\n    path: /workspace\n":        `without a name`,
		"kubernetes:\n  workspace_volume:\n    name: ws\n    path: rel\n": `kubernetes.workspace_volume.path "rel"`,
		"enclosure:\n  auto: [kubernetes, k8s]\n":                         `unknown driver "k8s"`,
		"kubernetes:\n  workspace_volume:\n    nme: ws\n":                 `kubernetes.workspace_volume has no key "nme": give the volume's name, or {name, path}`,
	} {
		if _, err := loadConfig(writeConfigFile(t, text)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want %q", text, err, want)
		}
	}
}
