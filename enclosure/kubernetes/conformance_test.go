package kubernetes

import (
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/docker/dockertest"
	"github.com/berth-dev/berth/enclosure/enclosuretest"
	"github.com/berth-dev/berth/enclosure/kubernetes/kubetest"
	"github.com/berth-dev/berth/enclosure/relayexec"
)

// The Kubernetes driver keeps the enclosure contract against the
// stand-in (issue 27 item 2), which produces every fault on demand: a
// pod stopped or deleted, an API server that falls silent, a container
// with no relay or nowhere to put one.
func TestKubernetesDriverKeepsTheEnclosureContract(t *testing.T) {
	enclosuretest.Run(t, &harness{Base: enclosuretest.Base{Driver: Name, At: "/workspace"}, s: standIn(t), root: enclosuretest.Workdir(t)})
}

// harness is the conformance suite's Kubernetes: the stand-in's pods,
// each mounting its own directory of one workspace volume that Berth
// mounts at root.
type harness struct {
	enclosuretest.Base
	s    *kubetest.Server
	root string
}

func (h *harness) Workdir(t *testing.T) string {
	dir, err := os.MkdirTemp(h.root, "wd-")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func (h *harness) Driver(t *testing.T, via string) enclosure.Driver {
	o := Options{Config: Config{Workspace: Volume{Name: kubetest.WorkspaceVolume, Path: h.root}}}
	if via != "" {
		o.Rest = &rest.Config{Host: "http://" + via}
	}
	return newDriver(t, h.s, o)
}

func (h *harness) Make(t *testing.T, o enclosuretest.Options) (string, error) {
	p := kubetest.Pod{Conversation: o.Conversation}
	switch o.Relay {
	case enclosuretest.RelayStreamed:
		p.Image = enclosuretest.BaseImage
	case enclosuretest.RelayImpossible:
		p.Image = enclosuretest.BaseImage
		p.DockerFlags = []string{"--read-only", "--tmpfs", "/tmp"}
	}
	if o.Workdir != "" {
		rel, err := filepath.Rel(h.root, o.Workdir)
		if err != nil {
			return "", err
		}
		p.Workdir, p.SubPath = h.root, rel
	}
	return runPod(t, h.s, p), nil
}

// Stop has the pod fail, then kills its container, as the kubelet does.
func (h *harness) Stop(t *testing.T, id string) error {
	h.s.SetPhase(id, corev1.PodFailed)
	_, err := dockertest.Run("kill", h.container(id))
	return err
}

func (h *harness) Remove(t *testing.T, id string) error {
	h.s.DeletePod(id)
	return nil
}

func (h *harness) Processes(t *testing.T, id string) []string {
	out, err := dockertest.Run("top", h.container(id), "-o", "pid,args")
	if err != nil {
		return nil
	}
	return strings.Split(out, "\n")[1:]
}

// container is the Docker container behind the pod (its id as Make gave
// it, or with the container's name).
func (h *harness) container(id string) string {
	parts := strings.Split(id, "/")
	return h.s.ContainerID(parts[0]+"/"+parts[1], "sandbox")
}

func (h *harness) Engine() (string, string, error) {
	u, err := url.Parse(h.s.URL)
	if err != nil {
		return "", "", err
	}
	return "tcp", u.Host, nil
}

// Misled is a driver that takes the workspace volume to be mounted at
// elsewhere, a copy of root's tree without its contents.
func (h *harness) Misled(t *testing.T, wd, elsewhere string, log *slog.Logger) (enclosure.Driver, error) {
	if err := mirror(h.root, wd, elsewhere); err != nil {
		return nil, err
	}
	o := Options{Config: Config{Workspace: Volume{Name: kubetest.WorkspaceVolume, Path: elsewhere}}, Shared: relayexec.Shared{Log: log}}
	return newDriver(t, h.s, o), nil
}

// mirror makes wd's directory (below root) below elsewhere too, empty: a
// workspace volume Berth takes to be mounted at elsewhere.
func mirror(root, wd, elsewhere string) error {
	rel, err := filepath.Rel(root, wd)
	if err != nil {
		return err
	}
	return os.MkdirAll(filepath.Join(elsewhere, rel), 0o755)
}
