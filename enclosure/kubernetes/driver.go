package kubernetes

import (
	"context"
	"fmt"
	"go.yaml.in/yaml/v3"
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

// Config is the "kubernetes" section of Berth's configuration: how Berth
// reaches the cluster and the conversation's pods.
type Config struct {
	// Kubeconfig is a kubeconfig file, for the kubernetes driver; empty:
	// $KUBECONFIG, else ~/.kube/config, else the in-cluster service
	// account. With none, "auto" skips the driver with a log line.
	Kubeconfig string `yaml:"kubeconfig"`
	// Namespace is where "auto" looks for the conversation's pod, and where
	// a bare pod name is; empty: the kubeconfig context's, or Berth's own
	// pod's, else default.
	Namespace string `yaml:"namespace"`
	// Container is the pod's container processes run in when the id names
	// none; empty: the pod's kubectl.kubernetes.io/default-container, else
	// its first.
	Container string `yaml:"container"`
	// Sidecar says Berth runs in the sandbox pod itself: Dial uses the
	// pod's loopback instead of a port-forward. It is also detected from
	// the downward API's POD_NAMESPACE and POD_NAME.
	Sidecar bool `yaml:"sidecar"`
	// Workspace is the volume the workspace is on, mounted by the
	// pod and by Berth: its name in the pod's spec (`workspace_volume:
	// workspace`), or {name, path}. Empty: no path crosses, and run/start
	// in a pod is refused.
	Workspace Volume `yaml:"workspace_volume"`
	// Stdio is how a process's stdin and stdout travel: socket (a unix
	// socket in its working directory on the workspace volume, where
	// Berth sees it and can reach it: a sidecar, or a volume on Berth's
	// node; the exec's stream otherwise) or exec (the exec's stream,
	// through the API server and the kubelet).
	Stdio string `yaml:"stdio"`
}

// DefaultConfig is the section's built-in defaults.
func DefaultConfig() Config { return Config{Stdio: relayexec.StdioSocket} }

// Options configure the driver: its section, what every container driver
// takes, and what tests and a pod of Berth's own set.
type Options struct {
	Config
	relayexec.Shared
	// Self is Berth's own pod, "namespace/name", when it runs in one;
	// empty: found from $POD_NAMESPACE/$POD_NAME, else, in a cluster, from
	// the host name and the service account's namespace.
	Self string
	// Rest, when set, is used instead of loading a kubeconfig (tests).
	Rest *rest.Config
}

// Volume is kubernetes.workspace_volume: a volume's name alone (Berth
// mounts the volume where the pod does), or {name, path}. Path empty:
// Berth mounts the volume's root where the pod's container mounts it (as
// deploy/kubernetes does in both shapes: a sidecar shares the pod's
// emptyDir at /workspace; beside the harness, Berth mounts the shared
// claim at /workspace and each sandbox pod its conversation's subPath
// there).
type Volume struct {
	// Name is the volume's name in the sandbox pod's spec.volumes.
	Name string `yaml:"name"`
	// Path is where Berth mounts the same volume's root; empty: where the
	// pod's container mounts it.
	Path string `yaml:"path"`
}

// UnmarshalYAML takes the volume's name alone, or the mapping, whose keys
// are checked as strictly as the file's.
func (v *Volume) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*v = Volume{}
		return n.Decode(&v.Name)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i].Value; k != "name" && k != "path" {
			return fmt.Errorf("line %d: kubernetes.workspace_volume has no key %q: give the volume's name, or {name, path}", n.Content[i].Line, k)
		}
	}
	type plain Volume
	return n.Decode((*plain)(v))
}

// Check says what is wrong with the section, for the configuration's
// check: names Kubernetes accepts, absolute paths.
func (o Config) Check() error {
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
	if err := relayexec.CheckStdio("kubernetes.stdio", o.Stdio); err != nil {
		return err
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
	o.Shared = o.Shared.WithDefaults()
	d := &Driver{opts: o, findRelay: o.FindRelay("kubernetes")}
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
	cfg := d.opts.Rest
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

// unavailable explains an error of a call on namespace ns that got no
// answer from the API server (unavailable), or one that refuses Berth
// (permission: a 403, or a 401 for credentials it does not accept): what
// was refused (the API server's own words name the identity and the
// namespace) and what to do, grant the Role there or move the pod.
func (a *api) unavailable(what, ns string, err error) error {
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("kubernetes: %s: %s refused Berth: %v: Berth's identity may not do this in namespace %s. deploy/kubernetes's Role (get and list on pods; get and create on pods/exec and pods/portforward) covers only the namespace it is bound in: bind it to Berth's service account with a RoleBinding in namespace %s, or run the conversation's pods in Berth's namespace %s (kubernetes.namespace): %w", what, a.where, err, ns, ns, a.namespace, enclosure.ErrRefused)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("kubernetes: %s: %s did not accept Berth's credentials: %v: the token or certificate of the configuration Berth loads (kubernetes.kubeconfig, $KUBECONFIG, ~/.kube/config, else in-cluster) is expired, revoked or for another cluster: renew it: %w", what, a.where, err, enclosure.ErrRefused)
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
		return nil, a.unavailable("listing the pods labelled "+sel+" in namespace "+a.namespace, a.namespace, err)
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
		Sockets: relayexec.NewSockets(d.opts.Stdio, "kubernetes.stdio", where, d.opts.Log),
	}
	p.sidecar = d.opts.Sidecar || d.self() == ns+"/"+name
	// The relay goes in through an exec of sh when the image lacks it
	// (the API server has no archive API), as the container's user,
	// where that user can write and execute (relay.StreamRoots).
	if err := d.installer.Into(ctx, p.Container, relayexec.Install{Run: p.run, Log: d.opts.Log,
		Advice: "give the container sh and a writable directory that allows exec (an emptyDir at /tmp)"}, d.findRelay); err != nil {
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
