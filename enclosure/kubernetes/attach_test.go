package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/kubernetes/kubetest"
	"github.com/berth-dev/berth/internal/errclass"
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

// An API server that does not answer is ErrUnavailable; one that
// refuses Berth, or does not accept its credentials, is ErrPermission;
// each says what to do: check the cluster
// and the configuration, grant the service account the Role in the pod's
// namespace or move the pod to Berth's, or renew the token. (A real
// cluster's refusal: TestClusterRBACPodOutsideTheRolesNamespaceIsRefused.)
//
// Issue 16 item 1; issue 26 item 3 (the refusal names the namespace and
// both ways out); issue 27 item 3 (the refusal's class is permission).
func TestUnreachableOrRefusingAPIServerSaysWhatToDo(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	status := func(code int, reason metav1.StatusReason, msg string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg})
		}))
	}
	forbidding := status(http.StatusForbidden, metav1.StatusReasonForbidden, `pods "p" is forbidden: User "system:serviceaccount:berth:berth" cannot get resource "pods" in API group "" in the namespace "sandboxes"`)
	defer forbidding.Close()
	rejecting := status(http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized")
	defer rejecting.Close()
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusForbidden)
	}))
	defer plain.Close()
	for host, wants := range map[string][]string{
		closed: {closed, "did not answer", "check that the cluster runs"},
		forbidding.URL: {forbidding.URL, "refused Berth", `User "system:serviceaccount:berth:berth" cannot get resource "pods"`,
			"may not do this in namespace sandboxes", "RoleBinding in namespace sandboxes", "Berth's namespace berth"},
		plain.URL:     {plain.URL, "refused Berth", "RoleBinding in namespace sandboxes"},
		rejecting.URL: {rejecting.URL, "did not accept Berth's credentials", "renew it"},
	} {
		// A cluster that does not answer is unavailable; one that refuses
		// Berth (403, or 401) is permission (issue 27 item 3).
		class := errclass.Permission
		if host == closed {
			class = errclass.Unavailable
		}
		_, err := newDriver(t, nil, Options{Rest: &rest.Config{Host: host}, Config: Config{Namespace: "berth"}}).Attach(context.Background(), "sandboxes/p")
		if errclass.Of(err) != class || slices.ContainsFunc(wants, func(w string) bool { return !strings.Contains(err.Error(), w) }) {
			t.Errorf("%s: %v (class %q); want class %q saying %q", host, err, errclass.Of(err), class, wants)
		}
	}
	// "auto" lists in Berth's own namespace: the Role is missing there.
	_, err = newDriver(t, nil, Options{Rest: &rest.Config{Host: forbidding.URL}, Config: Config{Namespace: "berth"}}).Find(context.Background(), "c1")
	if !errors.Is(err, enclosure.ErrPermission) || !strings.Contains(err.Error(), "RoleBinding in namespace berth") {
		t.Errorf("auto refused: %v; want ErrPermission saying to bind the Role in namespace berth", err)
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
