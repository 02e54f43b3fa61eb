package kubernetes

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/kubernetes/kubetest"
)

// The configuration comes from kubernetes.kubeconfig or $KUBECONFIG,
// with the context's namespace; none at all is an engine that does not
// answer, which "auto" skips.
//
// Issue 16 item 1.
func TestConfigurationFromKubeconfigOrEnvironment(t *testing.T) {
	s := standIn(t)
	runPod(t, s, kubetest.Pod{Namespace: "sandboxes", Name: "conv", Conversation: "c1"})
	kc := s.Kubeconfig(t, "sandboxes")
	ctx := context.Background()

	ids, err := newDriver(t, nil, Options{Config: Config{Kubeconfig: kc}}).Find(ctx, "c1")
	if err != nil || len(ids) != 1 || ids[0] != "sandboxes/conv" {
		t.Errorf("kubernetes.kubeconfig: Find = %v, %v; want [sandboxes/conv] (the context's namespace)", ids, err)
	}
	t.Setenv("KUBECONFIG", kc)
	if ids, err := newDriver(t, nil, Options{}).Find(ctx, "c1"); err != nil || len(ids) != 1 {
		t.Errorf("$KUBECONFIG: Find = %v, %v; want the pod", ids, err)
	}
	if ids, err := newDriver(t, nil, Options{Config: Config{Namespace: "default"}}).Find(ctx, "c1"); err != nil || len(ids) != 0 {
		t.Errorf("kubernetes.namespace default over the context's: Find = %v, %v; want none", ids, err)
	}

	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	_, err = newDriver(t, nil, Options{}).Find(ctx, "c1")
	if !errors.Is(err, enclosure.ErrUnavailable) || !strings.Contains(err.Error(), "kubernetes.kubeconfig") {
		t.Errorf("no configuration: %v; want ErrUnavailable naming kubernetes.kubeconfig", err)
	}
	missing := filepath.Join(t.TempDir(), "none")
	if _, err := newDriver(t, nil, Options{Config: Config{Kubeconfig: missing}}).Find(ctx, "c1"); !errors.Is(err, enclosure.ErrUnavailable) || !strings.Contains(err.Error(), missing) {
		t.Errorf("a missing kubernetes.kubeconfig: %v; want ErrUnavailable naming the file", err)
	}
}

// An API server that does not answer, or refuses Berth, is
// ErrUnavailable with what to do: check the cluster and the
// configuration, or grant the service account the Role.
//
// Issue 16 item 1.
func TestUnreachableOrRefusingAPIServerSaysWhatToDo(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusForbidden)
	}))
	defer refusing.Close()
	for host, wants := range map[string][]string{
		closed:       {closed, "did not answer", "check that the cluster runs"},
		refusing.URL: {refusing.URL, "refused Berth", "give Berth's service account get and list on pods"},
	} {
		_, err := newDriver(t, nil, Options{Rest: &rest.Config{Host: host}}).Find(context.Background(), "c1")
		if !errors.Is(err, enclosure.ErrUnavailable) || slices.ContainsFunc(wants, func(w string) bool { return !strings.Contains(err.Error(), w) }) {
			t.Errorf("%s: %v; want ErrUnavailable saying %q", host, err, wants)
		}
	}
}

// A caller's context that has ended ends Attach and Start with its own
// error, without reading the pod or running anything in it.
//
// Issue 16 item 2.
func TestCancelledContextEndsAttachAndStart(t *testing.T) {
	s := standIn(t)
	id := runPod(t, s, kubetest.Pod{})
	d := newDriver(t, s, Options{})
	p := attach(t, d, id)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.Attach(ctx, id); !errors.Is(err, context.Canceled) {
		t.Errorf("Attach with a cancelled context: %v; want context.Canceled", err)
	}
	if _, err := p.Start(ctx, enclosure.Cmd{Path: "/bin/true"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Start with a cancelled context: %v; want context.Canceled", err)
	}
}

// A pod that is not Running, a missing one, or a container that does not
// run is an error naming what it is; Berth never creates one.
//
// Issue 16 item 2.
func TestPodNotRunningIsAnErrorNamingThePhase(t *testing.T) {
	s := standIn(t)
	id := runPod(t, s, kubetest.Pod{Name: "pending"})
	d := newDriver(t, s, Options{})
	ctx := context.Background()

	s.SetPhase(id, corev1.PodPending)
	_, err := d.Attach(ctx, id)
	if !errors.Is(err, enclosure.ErrGone) || !strings.Contains(err.Error(), "Pending") {
		t.Errorf("a Pending pod: %v; want ErrGone naming the phase", err)
	}
	if ids, err := d.Find(ctx, "x"); err != nil || len(ids) != 0 {
		t.Errorf("Find = %v, %v", ids, err)
	}
	s.SetPhase(id, corev1.PodRunning)
	if _, err := d.Attach(ctx, id+"/other"); !errors.Is(err, enclosure.ErrNotFound) || !strings.Contains(err.Error(), "sandbox") {
		t.Errorf("a container the pod has not: %v; want ErrNotFound listing its containers", err)
	}
	if _, err := d.Attach(ctx, "default/nosuch"); !errors.Is(err, enclosure.ErrGone) || !strings.Contains(err.Error(), "never creates") {
		t.Errorf("a missing pod: %v; want ErrGone saying Berth never creates one", err)
	}
	for _, bad := range []string{"a/b/c/d", "/x", "Not_A_Name"} {
		if _, err := d.Attach(ctx, bad); !errors.Is(err, enclosure.ErrInvalidConfig) {
			t.Errorf("Attach(%q): %v; want ErrInvalidConfig", bad, err)
		}
	}
}

// Berth is the pod's sidecar when kubernetes.sidecar says so, or when its
// own pod (the downward API's $POD_NAME) is the one attached.
//
// Issue 16 item 4.
func TestSidecarDetectedFromOwnPod(t *testing.T) {
	s := standIn(t)
	id := runPod(t, s, kubetest.Pod{Name: "with-berth"})
	if attach(t, newDriver(t, s, Options{}), id).sidecar {
		t.Error("a pod of another: sidecar")
	}
	if !attach(t, newDriver(t, s, Options{Config: Config{Sidecar: true}}), id).sidecar {
		t.Error("kubernetes.sidecar: true: not a sidecar")
	}
	t.Setenv("POD_NAME", "with-berth")
	t.Setenv("POD_NAMESPACE", "default")
	if !attach(t, newDriver(t, s, Options{}), id).sidecar {
		t.Error("Berth's own pod: not a sidecar")
	}
}
