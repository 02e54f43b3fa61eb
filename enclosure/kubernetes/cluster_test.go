package kubernetes

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/enclosuretest"
	"github.com/berth-dev/berth/enclosure/kubernetes/kubecluster"
	"github.com/berth-dev/berth/enclosure/relayexec"
)

// The driver against a real cluster (scripts/kube, found from
// $KUBECONFIG; none fails the test, never skips it), as Berth runs there:
// with deploy/kubernetes's ServiceAccount, Role and RoleBinding applied
// to a namespace of the test's, through a kubeconfig that carries the
// ServiceAccount's token (kubecluster.ServiceAccount), so every call is
// one the Role allows. The pods are made as a harness makes them
// (kubecluster.RunPod); Berth creates none.

// clusterPod is a namespace of the test's with Berth's ServiceAccount,
// and a pod there labelled conversation that mounts a fresh workdir at
// /workspace; d is a driver with the ServiceAccount's kubeconfig that
// sees that workdir as the workspace volume.
func clusterPod(t *testing.T, conversation string, o Options) (c *kubecluster.Cluster, id *kubecluster.Identity, k *kubecluster.Pod, wd string, d *Driver) {
	t.Helper()
	c = kubecluster.New(t)
	ns := c.Namespace(t, "berth-driver")
	id = c.ServiceAccount(t, ns)
	wd = enclosuretest.Workdir(t)
	k = c.RunPod(t, kubecluster.PodSpec{Namespace: ns, Conversation: conversation, Workdir: wd})
	o.Kubeconfig = id.Kubeconfig
	if o.Workspace == (Volume{}) {
		o.Workspace = Volume{Name: kubecluster.WorkspaceVolume, Path: wd}
	}
	return c, id, k, wd, newDriver(t, nil, o)
}

// The driver keeps the enclosure contract on the real cluster: the
// conformance suite (enclosuretest.Run) with Berth's ServiceAccount, on
// pods made as a harness makes them. The one fault it cannot make on
// demand, a pod that exists with its API server made silent, it makes
// too: a proxy in front of the API server falls silent.
//
// Issue 27 item 2; issue 26 item 2.
func TestClusterKubernetesDriverKeepsTheEnclosureContract(t *testing.T) {
	c := kubecluster.New(t)
	ns := c.Namespace(t, "berth-conformance")
	enclosuretest.Run(t, &clusterHarness{Base: enclosuretest.Base{Driver: Name, At: "/workspace"},
		c: c, ns: ns, id: c.ServiceAccount(t, ns), root: enclosuretest.Workdir(t), pods: map[string]*kubecluster.Pod{}})
}

// clusterHarness is the conformance suite's real cluster: pods in one
// namespace with Berth's ServiceAccount, each mounting its own directory
// of one hostPath workspace volume (root) that Berth sees at root.
type clusterHarness struct {
	enclosuretest.Base
	c    *kubecluster.Cluster
	ns   string
	id   *kubecluster.Identity
	root string
	pods map[string]*kubecluster.Pod
}

func (h *clusterHarness) Workdir(t *testing.T) string {
	dir, err := os.MkdirTemp(h.root, "wd-")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func (h *clusterHarness) options(workspace string) Options {
	return Options{Config: Config{Kubeconfig: h.id.Kubeconfig, Workspace: Volume{Name: kubecluster.WorkspaceVolume, Path: workspace}}}
}

// Driver reaches the API server at via with the ServiceAccount's token
// and the cluster's CA (the API server's certificate names 127.0.0.1,
// the proxy's address too).
func (h *clusterHarness) Driver(t *testing.T, via string) enclosure.Driver {
	o := h.options(h.root)
	if via != "" {
		o.Kubeconfig = ""
		o.Rest = rest.CopyConfig(h.id.Config)
		o.Rest.Host = "https://" + via
		o.Namespace = h.ns
	}
	return newDriver(t, nil, o)
}

func (h *clusterHarness) Make(t *testing.T, o enclosuretest.Options) (string, error) {
	wd := cmp.Or(o.Workdir, h.Workdir(t))
	rel, err := filepath.Rel(h.root, wd)
	if err != nil {
		return "", err
	}
	s := kubecluster.PodSpec{Namespace: h.ns, Conversation: o.Conversation, Workdir: h.root, SubPath: rel}
	switch o.Relay {
	case enclosuretest.RelayStreamed:
		s.Image = kubecluster.BaseImage
	case enclosuretest.RelayImpossible:
		s.Image, s.ReadOnly = kubecluster.BaseImage, true
	}
	k := h.c.RunPod(t, s)
	h.pods[k.ID()] = k
	return k.ID(), nil
}

// Stop kills the pod's container, as an OOM kill does: with restartPolicy
// Never the pod fails, and stays.
func (h *clusterHarness) Stop(t *testing.T, id string) error {
	_, err := kubecluster.Ctr("tasks", "kill", "-s", "SIGKILL", h.pods[id].ContainerID)
	return err
}

func (h *clusterHarness) Remove(t *testing.T, id string) error { return h.pods[id].Delete() }

func (h *clusterHarness) Processes(t *testing.T, id string) []string {
	return h.pods[strings.TrimSuffix(id, "/"+kubecluster.ContainerName)].Processes(t)
}

// Engine is the API server's address in the ServiceAccount's kubeconfig.
func (h *clusterHarness) Engine() (string, string, error) {
	u, err := url.Parse(h.id.Config.Host)
	if err != nil {
		return "", "", err
	}
	return "tcp", u.Host, nil
}

// Misled takes the workspace volume to be mounted at elsewhere, a copy
// of root's tree without its contents.
func (h *clusterHarness) Misled(t *testing.T, wd, elsewhere string, log *slog.Logger) (enclosure.Driver, error) {
	if err := mirror(h.root, wd, elsewhere); err != nil {
		return nil, err
	}
	o := h.options(elsewhere)
	o.Shared = relayexec.Shared{Log: log}
	return newDriver(t, nil, o), nil
}

// On a real API server (1.34), an exec and a port-forward go over
// WebSocket (v5.channel.k8s.io, and SPDY tunnelled through WebSocket):
// the SPDY fallback is the stand-in's to show
// (TestExecOverWebSocketAndSPDYFallback).
//
// Issue 16; issue 26 item 2.
func TestClusterDriverExecAndPortForwardGoOverWebSocket(t *testing.T) {
	t.Parallel()
	_, _, k, _, d := clusterPod(t, "", Options{})
	p := attach(t, d, k.ID())
	protocol, out, errOut, code := execIn(t, p, enclosure.Cmd{Path: "sh", Args: []string{"-c", "cat; echo e >&2; exit 3"}}, "through the API server\n")
	if out != "through the API server\n" || errOut != "e\n" || code != 3 {
		t.Errorf("exec: stdout %q, stderr %q, exit %d", out, errOut, code)
	}
	if protocol != ProtocolWebSocket {
		t.Errorf("the exec went over %s, want %s (v5.channel.k8s.io)", protocol, ProtocolWebSocket)
	}
	srv, err := p.Start(context.Background(), enclosure.Cmd{Path: "python3", Args: []string{"-c",
		"import socket\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()\nprint(s.getsockname()[1], flush=True)\nc, _ = s.accept()\nc.sendall(b'from the pod')\nc.close()"}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Kill()
	var port int
	line, _ := bufio.NewReader(srv.Stdout()).ReadString('\n')
	if _, err := fmt.Sscan(line, &port); err != nil {
		t.Fatalf("the listener's port: %q: %v", line, err)
	}
	conn, protocol, err := p.forward(context.Background(), port)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	got, _ := io.ReadAll(conn)
	conn.Close()
	if string(got) != "from the pod" || protocol != ProtocolWebSocket {
		t.Errorf("through the port-forward: %q over %s; want \"from the pod\" over %s", got, protocol, ProtocolWebSocket)
	}
}

// A pod in a namespace the Role does not cover is refused, by name and
// by "auto" there, with an error that names the refusal, Berth's
// ServiceAccount and the namespace, and says what to do: bind the Role
// there, or put the pod in Berth's namespace.
//
// Issue 26 item 3.
func TestClusterRBACPodOutsideTheRolesNamespaceIsRefused(t *testing.T) {
	t.Parallel()
	c, id, _, _, d := clusterPod(t, "", Options{})
	other := c.Namespace(t, "berth-elsewhere")
	k := c.RunPod(t, kubecluster.PodSpec{Namespace: other, Conversation: "conv-elsewhere", Workdir: enclosuretest.Workdir(t)})
	_, err := d.Attach(context.Background(), k.ID())
	t.Logf("attach: %v", err)
	wants := []string{"forbidden", id.User, `namespace "` + other + `"`, "RoleBinding in namespace " + other, "namespace " + id.Namespace}
	for _, w := range wants {
		if !errors.Is(err, enclosure.ErrRefused) || !strings.Contains(err.Error(), w) {
			t.Errorf("attach to %s outside the Role's namespace %s: %v; want ErrRefused (permission) saying %q", k.ID(), id.Namespace, err, w)
		}
	}
	od := newDriver(t, nil, Options{Config: Config{Kubeconfig: id.Kubeconfig, Namespace: other}})
	_, err = od.Find(context.Background(), "conv-elsewhere")
	t.Logf("auto: %v", err)
	for _, w := range append(wants[:3], "list") {
		if !errors.Is(err, enclosure.ErrRefused) || !strings.Contains(err.Error(), w) {
			t.Errorf("auto in namespace %s: %v; want ErrRefused (permission) saying %q", other, err, w)
		}
	}
}

// What deploy/kubernetes's Role allows Berth's ServiceAccount is what the
// driver uses and nothing more: the API server's own answer
// (SelfSubjectAccessReview, asked with the ServiceAccount's token) allows
// get and list on pods and get and create on pods/exec and
// pods/portforward in its namespace, and refuses every other verb here,
// every verb in another namespace, and secrets; a real create and delete
// of a pod are refused.
//
// Issue 26 item 3.
func TestClusterRBACOtherVerbsAreRefused(t *testing.T) {
	t.Parallel()
	c, id, k, _, _ := clusterPod(t, "", Options{})
	other := c.Namespace(t, "berth-other")
	az, err := authorizationv1client.NewForConfig(id.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, a := range []struct {
		ns, verb, resource, sub string
		allowed                 bool
	}{
		{id.Namespace, "get", "pods", "", true},
		{id.Namespace, "list", "pods", "", true},
		{id.Namespace, "get", "pods", "exec", true},
		{id.Namespace, "create", "pods", "exec", true},
		{id.Namespace, "get", "pods", "portforward", true},
		{id.Namespace, "create", "pods", "portforward", true},
		{id.Namespace, "watch", "pods", "", false},
		{id.Namespace, "create", "pods", "", false},
		{id.Namespace, "delete", "pods", "", false},
		{id.Namespace, "patch", "pods", "", false},
		{id.Namespace, "update", "pods", "", false},
		{id.Namespace, "create", "pods", "attach", false},
		{id.Namespace, "get", "pods", "log", false},
		{id.Namespace, "create", "pods", "eviction", false},
		{id.Namespace, "get", "secrets", "", false},
		{id.Namespace, "list", "configmaps", "", false},
		{id.Namespace, "create", "serviceaccounts", "token", false},
		{other, "get", "pods", "", false},
		{other, "list", "pods", "", false},
		{other, "create", "pods", "exec", false},
		{"", "list", "namespaces", "", false},
	} {
		r, err := az.SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: a.ns, Verb: a.verb, Resource: a.resource, Subresource: a.sub}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed != a.allowed {
			t.Errorf("%s may %s %s/%s in namespace %q: %v, want %v (%s)", id.User, a.verb, a.resource, a.sub, a.ns, r.Status.Allowed, a.allowed, r.Status.Reason)
		}
	}

	core, err := corev1client.NewForConfig(id.Config)
	if err != nil {
		t.Fatal(err)
	}
	_, err = core.Pods(id.Namespace).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "not-allowed"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: kubecluster.Image}}}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("the ServiceAccount creating a pod: %v, want forbidden", err)
	}
	if err := core.Pods(id.Namespace).Delete(ctx, k.Name, metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the ServiceAccount deleting the sandbox pod: %v, want forbidden", err)
	}
}
