// Package kubecluster is the tests' handle on a real Kubernetes cluster,
// the single-node one scripts/kube starts (the TestCluster... tests, run
// by scripts/kube-stage): where kubetest stands in for an API server,
// this package reaches kube-apiserver and a kubelet.
//
// It finds the cluster from $KUBECONFIG (an admin kubeconfig; a missing
// one fails the test and says to run scripts/kube start: a real-cluster
// test never skips), and does for a test what a harness and an operator
// do around Berth, never what Berth does:
//
//   - Namespace makes a namespace of the test's, deleted at its end;
//   - RunPod makes a pod as a harness makes one (hostNetwork, dnsPolicy
//     Default, no service account token, berth/full:dev never pulled,
//     sleep infinity, the workdir a hostPath volume, labelled
//     berth.conversation), waits until it runs, and deletes it (grace 0)
//     at the test's end, waiting until its container is gone;
//   - Pod.Command, Pod.Processes and Pod.Pid reach the pod's container
//     through the cluster's own containerd (ctr -n k8s.io), as a test
//     looks into a Docker container with docker exec and docker top;
//   - ServiceAccount applies deploy/kubernetes's own ServiceAccount, Role
//     and RoleBinding files (deploy/kubernetes/common, not copies) to a
//     namespace, asks the TokenRequest API for a token, and writes a
//     kubeconfig with it: Berth then runs with the identity and the
//     rights deploy/kubernetes gives it.
//
// Every client here dials the kubeconfig's server, which must be a
// loopback address (scripts/kube's https://127.0.0.1:16443): nothing
// addresses a private-range IP, and nothing uses in-cluster
// configuration.
package kubecluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	rbacv1client "k8s.io/client-go/kubernetes/typed/rbac/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/berth-dev/berth/enclosure"
)

// Image is the image the tests' pods run, imported into the cluster's
// containerd by scripts/kube start.
const Image = "berth/full:dev"

// WorkspaceVolume is the name of the hostPath volume RunPod mounts the
// workdir from (kubernetes.workspace_volume.name).
const WorkspaceVolume = "workspace"

// ContainerName is the name of a pod's one container.
const ContainerName = "sandbox"

// ServiceAccountName is deploy/kubernetes's ServiceAccount's name.
const ServiceAccountName = "berth"

// wait bounds each wait on the cluster: a pod to run or to go, a
// namespace's default ServiceAccount to appear.
const wait = 2 * time.Minute

// Cluster is the cluster $KUBECONFIG names, reached with its admin
// credentials.
type Cluster struct {
	// Kubeconfig is the admin kubeconfig's path.
	Kubeconfig string
	// Config is the admin's client configuration.
	Config *rest.Config
	// Core and RBAC are the admin's clients.
	Core corev1client.CoreV1Interface
	RBAC rbacv1client.RbacV1Interface

	mu   sync.Mutex
	pods map[string]*Pod // by container id
}

// New is the cluster of $KUBECONFIG. A missing or unreadable kubeconfig,
// one whose server is not a loopback address, or a cluster that does not
// answer fails the test with what to do: real-cluster tests are never
// skipped.
func New(t testing.TB) *Cluster {
	t.Helper()
	c, err := Open(os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	closeIdle(t, c.Config)
	return c
}

// closeIdle drops the idle connections of cfg's clients when the test
// ends: client-go keeps them (and their HTTP/2 readers) in a transport
// shared by every client of the same TLS configuration, which a leak
// check would find.
func closeIdle(t testing.TB, cfg *rest.Config) {
	t.Cleanup(func() {
		if rt, err := rest.TransportFor(cfg); err == nil {
			utilnet.CloseIdleConnectionsFor(rt)
		}
	})
}

// Open is New for a kubeconfig path.
func Open(kubeconfig string) (*Cluster, error) {
	if kubeconfig == "" {
		return nil, errors.New("kubecluster: $KUBECONFIG is not set: the TestCluster tests need a real cluster; run scripts/kube start and set KUBECONFIG to the path its last line prints (KUBECONFIG=~/.cache/berth/kube/admin.kubeconfig)")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubecluster: $KUBECONFIG %s: %v: run scripts/kube start, which writes it", kubeconfig, err)
	}
	if err := loopback(cfg.Host); err != nil {
		return nil, fmt.Errorf("kubecluster: $KUBECONFIG %s: %v", kubeconfig, err)
	}
	c := &Cluster{Kubeconfig: kubeconfig, Config: cfg, pods: map[string]*Pod{}}
	if c.Core, err = corev1client.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("kubecluster: %v", err)
	}
	if c.RBAC, err = rbacv1client.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("kubecluster: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Core.Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{}); err != nil {
		return nil, fmt.Errorf("kubecluster: the cluster at %s (from $KUBECONFIG %s) does not answer: %v: run scripts/kube start", cfg.Host, kubeconfig, err)
	}
	return c, nil
}

// loopback refuses a server that is not a loopback address: the tests
// address nothing else.
func loopback(host string) error {
	u, err := url.Parse(host)
	if err != nil {
		return fmt.Errorf("server %q: %v", host, err)
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("server %q is not a loopback address: the tests reach only a cluster on this machine (scripts/kube's https://127.0.0.1:16443)", host)
	}
	return nil
}

func ctxFor(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// Namespace makes a namespace named prefix-<random>, waits until its
// default ServiceAccount exists (a pod needs it), and deletes it when the
// test ends (after the test's pods, which are deleted first).
func (c *Cluster) Namespace(t testing.TB, prefix string) string {
	t.Helper()
	name := fmt.Sprintf("%s-%08x", prefix, rand.Uint32())
	ctx, cancel := ctxFor(wait)
	defer cancel()
	if _, err := c.Core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"berth.test": "true"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("kubecluster: creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := ctxFor(30 * time.Second)
		defer cancel()
		if err := c.Core.Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("kubecluster: deleting namespace %s: %v", name, err)
		}
	})
	err := poll(ctx, func() (bool, error) {
		_, err := c.Core.ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("kubecluster: namespace %s has no default ServiceAccount after %s (does kube-controller-manager run? scripts/kube start runs it): %v", name, wait, err)
	}
	return name
}

// poll calls done every 100ms until it says true, returns an error, or
// ctx ends.
func poll(ctx context.Context, done func() (bool, error)) error {
	for {
		ok, err := done()
		if ok || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// PodSpec is a pod to make as a harness makes one.
type PodSpec struct {
	// Namespace is where it goes (required).
	Namespace string
	// Name is the pod's name; empty: berth-<random>.
	Name string
	// Conversation is its berth.conversation label; empty: none.
	Conversation string
	// Workdir is the host directory of its hostPath volume (required).
	Workdir string
	// SubPath, when not empty, is the directory of Workdir the container
	// mounts instead (the volumeMount's subPath).
	SubPath string
	// MountPath is where the container sees it; empty: /workspace.
	MountPath string
	// Image is the container's image; empty: Image.
	Image string
	// ReadOnly makes the container's root file system and its workdir
	// mount read-only: with CRI's noexec /dev/shm, nowhere in it can a
	// program be written and run.
	ReadOnly bool
}

// BaseImage is an image without the relay (and without python), for the
// relay's install paths; scripts/kube imports it with Image.
const BaseImage = "berth/base:bookworm"

// Pod is a running pod RunPod made.
type Pod struct {
	Namespace, Name string
	// ContainerID is its container's id in the cluster's containerd.
	ContainerID string

	c    *Cluster
	pid1 int
}

// ID is the pod as the driver takes it: namespace/name.
func (p *Pod) ID() string { return p.Namespace + "/" + p.Name }

// RunPod makes the pod, waits until its container runs, and deletes it
// when the test ends (waiting until its container is gone).
func (c *Cluster) RunPod(t testing.TB, s PodSpec) *Pod {
	t.Helper()
	if s.Name == "" {
		s.Name = fmt.Sprintf("berth-%08x", rand.Uint32())
	}
	if s.Image == "" {
		s.Image = Image
	}
	if s.MountPath == "" {
		s.MountPath = "/workspace"
	}
	labels := map[string]string{"berth.test": "true"}
	if s.Conversation != "" {
		labels[enclosure.ConversationLabel] = s.Conversation
	}
	no, grace := false, int64(0)
	dir := corev1.HostPathDirectory
	k := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, Labels: labels},
		Spec: corev1.PodSpec{
			HostNetwork:                   true,
			DNSPolicy:                     corev1.DNSDefault,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			RestartPolicy:                 corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: ContainerName, Image: s.Image, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sleep", "infinity"}, WorkingDir: s.MountPath,
				VolumeMounts:    []corev1.VolumeMount{{Name: WorkspaceVolume, MountPath: s.MountPath, SubPath: s.SubPath, ReadOnly: s.ReadOnly}},
				SecurityContext: &corev1.SecurityContext{ReadOnlyRootFilesystem: &s.ReadOnly},
			}},
			Volumes: []corev1.Volume{{Name: WorkspaceVolume, VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: s.Workdir, Type: &dir}}}},
		},
	}
	ctx, cancel := ctxFor(wait)
	defer cancel()
	if _, err := c.Core.Pods(s.Namespace).Create(ctx, k, metav1.CreateOptions{}); err != nil {
		t.Fatalf("kubecluster: creating pod %s/%s: %v", s.Namespace, s.Name, err)
	}
	p := &Pod{Namespace: s.Namespace, Name: s.Name, c: c}
	t.Cleanup(func() {
		if err := p.Delete(); err != nil {
			t.Error(err)
		}
	})
	var last *corev1.Pod
	err := poll(ctx, func() (bool, error) {
		got, err := c.Core.Pods(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = got
		if got.Status.Phase == corev1.PodFailed || got.Status.Phase == corev1.PodSucceeded {
			return false, fmt.Errorf("the pod is %s", got.Status.Phase)
		}
		for _, st := range got.Status.ContainerStatuses {
			if st.State.Running != nil && st.ContainerID != "" {
				p.ContainerID = st.ContainerID[strings.Index(st.ContainerID, "://")+3:]
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("kubecluster: pod %s/%s does not run after %s: %v; its status: %+v", s.Namespace, s.Name, wait, err, status(last))
	}
	c.mu.Lock()
	c.pods[p.ContainerID] = p
	c.mu.Unlock()
	return p
}

func status(p *corev1.Pod) any {
	if p == nil {
		return nil
	}
	return p.Status
}

// PodOf is the pod whose container has this id (nil: none of RunPod's).
func (c *Cluster) PodOf(containerID string) *Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pods[containerID]
}

// Delete deletes the pod with grace 0 and waits until it is gone from the
// API server and its container's task from containerd. A pod already
// deleted is no error.
func (p *Pod) Delete() error {
	ctx, cancel := ctxFor(wait)
	defer cancel()
	grace := int64(0)
	err := p.c.Core.Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kubecluster: deleting pod %s: %v", p.ID(), err)
	}
	err = poll(ctx, func() (bool, error) {
		_, err := p.c.Core.Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, nil
		}
		if p.ContainerID == "" {
			return true, nil
		}
		out, err := Ctr("tasks", "ls", "-q")
		if err != nil {
			return false, err
		}
		return !slices.Contains(strings.Fields(out), p.ContainerID), nil
	})
	if err != nil {
		return fmt.Errorf("kubecluster: pod %s (container %.12s) is not gone %s after its deletion: %v", p.ID(), p.ContainerID, wait, err)
	}
	return nil
}

// Socket is the cluster's containerd's socket, as scripts/kube starts it.
func Socket() string {
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "berth", "kube", "run", "containerd.sock")
}

// CRINamespace is the containerd namespace the kubelet's containers are
// in.
const CRINamespace = "k8s.io"

// Ctr runs ctr against the cluster's containerd and returns its stdout.
func Ctr(args ...string) (string, error) {
	cmd := exec.Command("ctr", append([]string{"-a", Socket(), "-n", CRINamespace}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("ctr %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// Command is argv run in the pod's container with its working directory
// dir (ctr tasks exec, in the background with detach), as a test runs a
// command in a Docker container with docker exec.
func (p *Pod) Command(dir string, detach bool, argv ...string) *exec.Cmd {
	args := []string{"-a", Socket(), "-n", CRINamespace, "tasks", "exec", "--exec-id", fmt.Sprintf("test-%08x", rand.Uint32()), "--cwd", dir}
	if detach {
		args = append(args, "-d")
	}
	return exec.Command("ctr", append(append(args, p.ContainerID), argv...)...)
}

// Processes is the container's processes as "PID PPID ARGS", host pids,
// as docker top shows a Docker container's.
func (p *Pod) Processes(t testing.TB) []string {
	t.Helper()
	out, err := Ctr("tasks", "ps", p.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	var procs []string
	for _, line := range strings.Split(out, "\n")[1:] { // the header
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		stat, err := os.ReadFile("/proc/" + f[0] + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// The fields after the command's ")": state, ppid, ...
		after := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		cmdline, _ := os.ReadFile("/proc/" + f[0] + "/cmdline")
		args := strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))
		procs = append(procs, f[0]+" "+after[1]+" "+args)
	}
	return procs
}

// Pid is the host's pid of the container's own process (sleep).
func (p *Pod) Pid(t testing.TB) int {
	t.Helper()
	if p.pid1 != 0 {
		return p.pid1
	}
	out, err := Ctr("tasks", "ls")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == p.ContainerID {
			p.pid1, _ = strconv.Atoi(f[1])
			return p.pid1
		}
	}
	t.Fatalf("kubecluster: no task %s (pod %s) in ctr tasks ls:\n%s", p.ContainerID, p.ID(), out)
	return 0
}

// Identity is deploy/kubernetes's ServiceAccount in a namespace, with its
// Role and RoleBinding applied, and a kubeconfig that carries its token.
type Identity struct {
	// Namespace is where the ServiceAccount, the Role and the binding are.
	Namespace string
	// Kubeconfig is a kubeconfig file for the ServiceAccount: the
	// cluster's server and CA, the token, the namespace as its context's.
	Kubeconfig string
	// Config is the same as a client configuration.
	Config *rest.Config
	// User is the ServiceAccount's user name in the API server's
	// answers: system:serviceaccount:<namespace>:berth.
	User string
}

// commonDir is deploy/kubernetes/common in this source tree.
func commonDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "deploy", "kubernetes", "common")
}

// ServiceAccount applies deploy/kubernetes/common's serviceaccount.yaml,
// role.yaml and rolebinding.yaml (the files themselves) to ns, as
// kustomize would with that namespace set (the binding's subject gets
// the ServiceAccount's namespace), asks the TokenRequest API for the
// ServiceAccount's token (an hour), and writes a kubeconfig for it in a
// directory of the test's.
func (c *Cluster) ServiceAccount(t testing.TB, ns string) *Identity {
	t.Helper()
	ctx, cancel := ctxFor(time.Minute)
	defer cancel()
	for _, name := range []string{"serviceaccount.yaml", "role.yaml", "rolebinding.yaml"} {
		path := filepath.Join(commonDir(), name)
		if err := c.apply(ctx, path, ns); err != nil {
			t.Fatalf("kubecluster: applying %s to namespace %s: %v", path, ns, err)
		}
	}
	hour := int64(3600)
	tr, err := c.Core.ServiceAccounts(ns).CreateToken(ctx, ServiceAccountName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("kubecluster: a token for ServiceAccount %s/%s: %v", ns, ServiceAccountName, err)
	}
	id := &Identity{Namespace: ns, User: "system:serviceaccount:" + ns + ":" + ServiceAccountName}
	id.Kubeconfig = filepath.Join(t.TempDir(), "berth-sa.kubeconfig")
	if err := c.writeKubeconfig(id.Kubeconfig, ns, tr.Status.Token); err != nil {
		t.Fatal(err)
	}
	if id.Config, err = clientcmd.BuildConfigFromFlags("", id.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	closeIdle(t, id.Config)
	return id
}

// apply creates the one object the file holds in ns.
func (c *Cluster) apply(ctx context.Context, path, ns string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	obj, gvk, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		return err
	}
	opts := metav1.CreateOptions{FieldManager: "kubecluster"}
	switch o := obj.(type) {
	case *corev1.ServiceAccount:
		o.Namespace = ns
		_, err = c.Core.ServiceAccounts(ns).Create(ctx, o, opts)
	case *rbacv1.Role:
		o.Namespace = ns
		_, err = c.RBAC.Roles(ns).Create(ctx, o, opts)
	case *rbacv1.RoleBinding:
		o.Namespace = ns
		for i := range o.Subjects {
			if o.Subjects[i].Kind == rbacv1.ServiceAccountKind && o.Subjects[i].Namespace == "" {
				o.Subjects[i].Namespace = ns
			}
		}
		_, err = c.RBAC.RoleBindings(ns).Create(ctx, o, opts)
	default:
		return fmt.Errorf("a %s: kubecluster applies only a ServiceAccount, a Role and a RoleBinding", kind(gvk))
	}
	return err
}

func kind(gvk *schema.GroupVersionKind) string {
	if gvk == nil {
		return "object of no kind"
	}
	return gvk.String()
}

// writeKubeconfig writes a kubeconfig for the cluster's server and CA,
// with token as the user's credential and ns as the context's namespace.
func (c *Cluster) writeKubeconfig(path, ns, token string) error {
	ca := c.Config.CAData
	if len(ca) == 0 && c.Config.CAFile != "" {
		var err error
		if ca, err = os.ReadFile(c.Config.CAFile); err != nil {
			return err
		}
	}
	if len(ca) == 0 {
		return fmt.Errorf("kubecluster: the admin kubeconfig %s has no certificate authority", c.Kubeconfig)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: ca}
	cfg.AuthInfos[ServiceAccountName] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[ServiceAccountName] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: ServiceAccountName, Namespace: ns}
	cfg.CurrentContext = ServiceAccountName
	return clientcmd.WriteToFile(*cfg, path)
}
