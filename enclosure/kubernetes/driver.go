package kubernetes

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relayexec"
)

// Name is the driver's name in run/start's {driver, id} and in
// enclosure.auto.
const Name = "kubernetes"

// How a process's stdin and stdout travel (kubernetes.stdio).
const (
	// StdioSocket passes them through a unix socket in the process's
	// working directory, which Berth sees too through the workspace
	// volume (a sidecar in the pod, or a volume on the same node); where
	// it does not, or the relay cannot reach the socket, the exec's
	// stream carries them.
	StdioSocket = "socket"
	// StdioExec passes them in the exec's stream, through the API server
	// and the kubelet.
	StdioExec = "exec"
)

// Options configure the driver.
type Options struct {
	// Kubeconfig is kubernetes.kubeconfig, a kubeconfig file. Empty:
	// $KUBECONFIG, then ~/.kube/config, then the in-cluster configuration
	// (the pod's service account), as kubectl looks.
	Kubeconfig string
	// Namespace is kubernetes.namespace, where "auto" looks and where an
	// id without a namespace is. Empty: the kubeconfig context's, or the
	// in-cluster pod's own, else "default".
	Namespace string
	// Container is kubernetes.container, the container processes run in
	// when the id names none. Empty: the pod's
	// kubectl.kubernetes.io/default-container annotation, else its first
	// container.
	Container string
	// Sidecar is kubernetes.sidecar: Berth runs in the sandbox pod itself,
	// so Dial uses the pod's loopback. It is also detected from Berth's own
	// pod (Self).
	Sidecar bool
	// Workspace is kubernetes.workspace_volume: the volume the workspace
	// is on, mounted both in the sandbox pod and by Berth.
	Workspace Volume
	// Stdio is kubernetes.stdio, StdioSocket (default) or StdioExec.
	Stdio string
	// Self is Berth's own pod, "namespace/name", when it runs in one;
	// empty: found from $POD_NAMESPACE/$POD_NAME, else, in a cluster, from
	// the host name and the service account's namespace.
	Self string
	// Config, when set, is used instead of loading a kubeconfig (tests).
	Config *rest.Config
	// Relay returns the relay to install; nil: relay.Find.
	Relay func() (*relay.Binary, error)
	// Log receives what the driver decides on its own (where the relay
	// came from, a fallback to SPDY).
	Log *slog.Logger
}

// Volume names the workspace's volume: Name as the sandbox pod's
// spec.volumes calls it, Path where Berth itself mounts the same volume
// (its root). Path empty: Berth mounts the volume's root where the pod's
// container mounts it (as deploy/kubernetes does in both shapes: a
// sidecar shares the pod's emptyDir at /workspace; beside the harness,
// Berth mounts the shared claim at /workspace and each sandbox pod its
// conversation's subPath there).
type Volume struct {
	Name string
	Path string
}

// Check says what is wrong with the options a configuration gives, for
// the configuration's check: names Kubernetes accepts, absolute paths.
func (o Options) Check() error {
	for _, f := range []struct{ key, value string }{{"kubernetes.namespace", o.Namespace}, {"kubernetes.container", o.Container}, {"kubernetes.workspace_volume.name", o.Workspace.Name}} {
		if f.value == "" {
			continue
		}
		if errs := validation.IsDNS1123Label(f.value); len(errs) > 0 {
			return fmt.Errorf("%s %q: %s: %w", f.key, f.value, strings.Join(errs, "; "), enclosure.ErrInvalidConfig)
		}
	}
	for _, f := range []struct{ key, value string }{{"kubernetes.kubeconfig", o.Kubeconfig}, {"kubernetes.workspace_volume.path", o.Workspace.Path}} {
		if f.value != "" && !filepath.IsAbs(f.value) {
			return fmt.Errorf("%s %q: use an absolute path: %w", f.key, f.value, enclosure.ErrInvalidConfig)
		}
	}
	if o.Stdio != "" && o.Stdio != StdioSocket && o.Stdio != StdioExec {
		return fmt.Errorf("kubernetes.stdio %q: use %s or %s: %w", o.Stdio, StdioSocket, StdioExec, enclosure.ErrInvalidConfig)
	}
	if o.Workspace.Path != "" && o.Workspace.Name == "" {
		return fmt.Errorf("kubernetes.workspace_volume.path %q without a name: set kubernetes.workspace_volume.name to the volume's name in the pod's spec: %w", o.Workspace.Path, enclosure.ErrInvalidConfig)
	}
	return nil
}

// Driver attaches to running pods. Its client is made on first use, so a
// machine without a cluster starts Berth as fast as one with.
type Driver struct {
	opts Options

	client func() (*api, error)
	// findRelay is opts.Relay, asked once, when a pod first needs the
	// relay.
	findRelay func() (*relay.Binary, error)
	self      func() string

	// installer remembers where the relay went in each container, so a
	// second run in the same container checks that one place first.
	installer relayexec.Installer

	spdyOnce  sync.Once   // logs the first fallback to SPDY
	connected atomic.Bool // the client was made
}

// api is the client and what it was made from.
type api struct {
	cfg       *rest.Config
	core      corev1client.CoreV1Interface
	namespace string
	where     string // the API server, for errors
}

var _ enclosure.Driver = (*Driver)(nil)

// New returns the driver. It does not contact the API server.
func New(o Options) *Driver {
	if o.Relay == nil {
		o.Relay = relay.Find
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Stdio == "" {
		o.Stdio = StdioSocket
	}
	d := &Driver{opts: o, findRelay: sync.OnceValues(o.Relay)}
	d.client = sync.OnceValues(d.connect)
	d.self = sync.OnceValue(func() string {
		if o.Self != "" {
			return o.Self
		}
		return selfPod()
	})
	return d
}

func (d *Driver) Name() string { return Name }

// Close drops the client's idle connections (a cluster's are kept open
// between calls). Enclosures attached through the driver must not be used
// afterwards.
func (d *Driver) Close() error {
	if !d.connected.Load() {
		return nil
	}
	if a, err := d.client(); err == nil {
		if rc, ok := a.core.RESTClient().(*rest.RESTClient); ok && rc.Client != nil {
			utilnet.CloseIdleConnectionsFor(rc.Client.Transport)
		}
	}
	return nil
}

// connect loads the configuration as kubectl does (an explicit file, then
// $KUBECONFIG and ~/.kube/config, then in-cluster) and makes the client.
func (d *Driver) connect() (*api, error) {
	d.connected.Store(true)
	cfg := d.opts.Config
	ns := d.opts.Namespace
	if cfg == nil {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = d.opts.Kubeconfig
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
		var err error
		if cfg, err = cc.ClientConfig(); err != nil {
			return nil, fmt.Errorf("kubernetes: no configuration to reach a cluster (kubernetes.kubeconfig %q, $KUBECONFIG, ~/.kube/config, in-cluster): %v: set kubernetes.kubeconfig, or run Berth in the cluster with a service account: %w", d.opts.Kubeconfig, err, enclosure.ErrUnavailable)
		}
		if ns == "" {
			if ns, _, err = cc.Namespace(); err != nil {
				return nil, fmt.Errorf("kubernetes: the kubeconfig's namespace: %v: set kubernetes.namespace: %w", err, enclosure.ErrInvalidConfig)
			}
		}
	}
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "berth"
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: a client for %s: %v: %w", cfg.Host, err, enclosure.ErrInvalidConfig)
	}
	return &api{cfg: cfg, core: core, namespace: ns, where: "the API server at " + cfg.Host}, nil
}

// apiTimeout bounds a call the API server answers at once (get, list).
const apiTimeout = 10 * time.Second

// unavailable explains an error of a call that got no answer from the API
// server, or one that refuses Berth.
func (a *api) unavailable(what string, err error) error {
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return fmt.Errorf("kubernetes: %s: %s refused Berth: %v: give Berth's service account get and list on pods, and create on pods/exec and pods/portforward (deploy/kubernetes has the Role): %w", what, a.where, err, enclosure.ErrUnavailable)
	}
	return fmt.Errorf("kubernetes: %s: %s did not answer: %v: check that the cluster runs and that the configuration Berth loads (kubernetes.kubeconfig, $KUBECONFIG, ~/.kube/config, else in-cluster) points at it: %w", what, a.where, err, enclosure.ErrUnavailable)
}

// Find returns the running pods labelled berth.conversation=<conversationID>
// in the configured namespace, as "namespace/name".
func (d *Driver) Find(ctx context.Context, conversationID string) ([]string, error) {
	a, err := d.client()
	if err != nil {
		return nil, err
	}
	if len(validation.IsValidLabelValue(conversationID)) > 0 {
		return nil, nil // no pod can carry it as a label's value
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	sel := labels.SelectorFromSet(labels.Set{enclosure.ConversationLabel: conversationID}).String()
	list, err := a.core.Pods(a.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, a.unavailable("listing the pods labelled "+sel+" in namespace "+a.namespace, err)
	}
	var ids []string
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			ids = append(ids, p.Namespace+"/"+p.Name)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// Attach reads the pod this id names ("namespace/pod[/container]", or
// "pod" in the configured namespace) and returns its container as an
// enclosure when it runs, with the relay installed.
func (d *Driver) Attach(ctx context.Context, id string) (enclosure.Enclosure, error) {
	a, err := d.client()
	if err != nil {
		return nil, err
	}
	ns, name, ctr, err := parseID(id, a.namespace)
	if err != nil {
		return nil, err
	}
	p := &pod{d: d, api: a, ns: ns, name: name}
	k, err := p.get(ctx)
	if err != nil {
		return nil, err
	}
	if ctr == "" {
		ctr = d.defaultContainer(k)
	}
	p.container = ctr
	if err := p.check(k); err != nil {
		return nil, err
	}
	where := "kubernetes " + p.String()
	p.Container = &relayexec.Container{
		Engine: p, Name: Name, Id: p.key(), Where: where, RelaySetsDirEnv: true,
		Paths:   d.crossing(p, k),
		Sockets: &relay.Sockets{Off: d.opts.Stdio == StdioExec, Where: where, Key: "kubernetes.stdio", Log: d.opts.Log},
	}
	p.sidecar = d.opts.Sidecar || d.self() == ns+"/"+name
	bin, err := d.findRelay()
	if err != nil {
		return nil, fmt.Errorf("kubernetes: the relay Berth installs into containers: %w", err)
	}
	if p.Relay, err = d.install(ctx, p, bin); err != nil {
		return nil, err
	}
	return p, nil
}

// parseID splits "namespace/pod[/container]" (or "pod").
func parseID(id, defaultNS string) (ns, name, ctr string, err error) {
	parts := strings.Split(id, "/")
	switch len(parts) {
	case 1:
		ns, name = defaultNS, parts[0]
	case 2:
		ns, name = parts[0], parts[1]
	case 3:
		ns, name, ctr = parts[0], parts[1], parts[2]
	}
	if len(parts) > 3 || slices.Contains(parts, "") {
		return "", "", "", fmt.Errorf("kubernetes: id %q: name a pod as namespace/pod or namespace/pod/container: %w", id, enclosure.ErrInvalidConfig)
	}
	for _, n := range []string{ns, name} {
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			return "", "", "", fmt.Errorf("kubernetes: id %q: %q is not a namespace or pod name (%s): %w", id, n, strings.Join(errs, "; "), enclosure.ErrInvalidConfig)
		}
	}
	return ns, name, ctr, nil
}

// defaultContainerAnnotation names the container kubectl exec picks.
const defaultContainerAnnotation = "kubectl.kubernetes.io/default-container"

func (d *Driver) defaultContainer(k *corev1.Pod) string {
	if d.opts.Container != "" {
		return d.opts.Container
	}
	if c := k.Annotations[defaultContainerAnnotation]; c != "" {
		return c
	}
	if len(k.Spec.Containers) > 0 {
		return k.Spec.Containers[0].Name
	}
	return ""
}

// serviceAccountNamespace is where a pod's service account's namespace is.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// selfPod is Berth's own pod as "namespace/name", or "" when Berth does
// not run in one: $POD_NAMESPACE and $POD_NAME (the downward API), else,
// in a cluster, the host name (a pod's, unless its spec sets another) and
// the service account's namespace.
func selfPod() string {
	name, ns := os.Getenv("POD_NAME"), os.Getenv("POD_NAMESPACE")
	if name == "" {
		if os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
			return ""
		}
		name, _ = os.Hostname()
	}
	if ns == "" {
		b, err := os.ReadFile(serviceAccountNamespace)
		if err != nil {
			return ""
		}
		ns = strings.TrimSpace(string(b))
	}
	if name == "" || ns == "" {
		return ""
	}
	return ns + "/" + name
}
