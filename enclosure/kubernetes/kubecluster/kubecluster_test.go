package kubecluster

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// No kubeconfig, one that is not there, or one whose server is not on
// loopback: an error that says to run scripts/kube start, or that the
// tests reach only a cluster on this machine.
func TestOpenSaysWhatToDo(t *testing.T) {
	remote := filepath.Join(t.TempDir(), "remote")
	if err := os.WriteFile(remote, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://10.0.0.1:6443'}}]\nusers: [{name: u, user: {token: x}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"":                     "run scripts/kube start",
		"/nonexistent/kubecfg": "run scripts/kube start",
		remote:                 "not a loopback address",
	} {
		if _, err := Open(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q): %v, want an error saying %q", path, err, want)
		}
	}
}

// A pod made as a harness makes one runs sleep alone, seen through the
// cluster's containerd; a command runs in its workdir, which is the
// hostPath directory; deleted, it is gone from the API server and from
// containerd. deploy/kubernetes's ServiceAccount's kubeconfig reads the
// pod in its namespace and may not delete it.
func TestClusterPodAndServiceAccount(t *testing.T) {
	c := New(t)
	ns := c.Namespace(t, "kubecluster")
	dir := t.TempDir()
	p := c.RunPod(t, PodSpec{Namespace: ns, Conversation: "kubecluster-test", Workdir: dir})
	if procs := p.Processes(t); len(procs) != 1 || !strings.HasSuffix(procs[0], "sleep infinity") || !strings.HasPrefix(procs[0], strconv.Itoa(p.Pid(t))+" ") {
		t.Errorf("the pod's processes: %q, want its sleep infinity alone", procs)
	}
	if out, err := p.Command("/workspace", false, "sh", "-c", "pwd > here").CombinedOutput(); err != nil {
		t.Fatalf("a command in the pod: %v: %s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "here")); err != nil || string(b) != "/workspace\n" {
		t.Errorf("the command's file in the hostPath directory: %q, %v", b, err)
	}
	if c.PodOf(p.ContainerID) != p {
		t.Errorf("PodOf(%s) is not the pod", p.ContainerID)
	}

	id := New(t).ServiceAccount(t, ns)
	sa, err := corev1client.NewForConfig(id.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sa.Pods(ns).Get(context.Background(), p.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the ServiceAccount reading its namespace's pod: %v", err)
	}
	err = sa.Pods(ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), id.User) {
		t.Errorf("the ServiceAccount deleting a pod: %v, want forbidden for %s", err, id.User)
	}

	if err := p.Delete(); err != nil {
		t.Fatal(err)
	}
	if out, err := Ctr("tasks", "ls", "-q"); err != nil || strings.Contains(out, p.ContainerID) {
		t.Errorf("the pod's task after its deletion: %v, %q", err, out)
	}
}
