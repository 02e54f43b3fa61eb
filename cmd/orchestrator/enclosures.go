package main

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"

	"go.yaml.in/yaml/v3"
	"k8s.io/klog/v2"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/containerd"
	"github.com/berth-dev/berth/enclosure/docker"
	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/enclosure/kubernetes"
	"github.com/berth-dev/berth/enclosure/mounts"
)

// dockerConfig is the "docker" section: how Berth reaches the Docker
// engine and runs processes in its containers.
type dockerConfig struct {
	// Host is the Docker engine's address (unix:///var/run/docker.sock,
	// tcp://HOST:PORT); empty: $DOCKER_HOST, else the local socket. The
	// client negotiates the API version, so Debian's docker.io 20.10 (API
	// 1.41) and newer engines both work; it is made at the first run/start
	// that needs it, never at Berth's start.
	Host string `yaml:"host"`
	// User runs processes in the container as this user (name, uid or
	// uid:gid); empty: the container's default user.
	User string `yaml:"user"`
	// Dial is how a port inside is reached: relay (an exec; works with
	// --network none, no privileges) or netns (Berth enters the
	// container's network namespace: root on the engine's host).
	Dial string `yaml:"dial"`
	// Stdio is how a process's stdin and stdout travel: socket (a unix
	// socket in its working directory, which Berth sees through the
	// workdir's mount; the exec's stream where it cannot) or exec (the
	// exec's stream, through the engine).
	Stdio string `yaml:"stdio"`
}

// containerdConfig is the "containerd" section: how Berth reaches
// containerd, for containers made without Docker (nerdctl, Kubernetes'
// CRI, a harness's ctr).
type containerdConfig struct {
	// Address is containerd's socket, for the containerd driver.
	Address string `yaml:"address"`
	// Namespace holds the conversation's containers: default (ctr's and
	// nerdctl's), or k8s.io (Kubernetes' CRI: a pod's containers). Docker's
	// own (moby) is refused: its containers are the docker driver's.
	Namespace string `yaml:"namespace"`
	// Stdio is how a process's stdin and stdout travel, as docker.stdio:
	// socket, or exec (the exec's FIFOs, through the shim).
	Stdio string `yaml:"stdio"`
}

func defaultContainerdConfig() containerdConfig {
	return containerdConfig{Address: containerd.DefaultAddress, Namespace: containerd.DefaultNamespace, Stdio: containerd.StdioSocket}
}

func (c *containerdConfig) check() error {
	if c.Stdio != containerd.StdioSocket && c.Stdio != containerd.StdioExec {
		return fmt.Errorf("containerd.stdio %q: use %s or %s", c.Stdio, containerd.StdioSocket, containerd.StdioExec)
	}
	if !filepath.IsAbs(c.Address) {
		return fmt.Errorf("containerd.address %q: use the absolute path of containerd's socket, such as %s", c.Address, containerd.DefaultAddress)
	}
	return containerd.CheckNamespace(c.Namespace)
}

// kubernetesConfig is the "kubernetes" section: how Berth reaches the
// cluster and the conversation's pods.
type kubernetesConfig struct {
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
	// WorkspaceVolume is the volume the workspace is on, mounted by the
	// pod and by Berth: its name in the pod's spec (`workspace_volume:
	// workspace`), or {name, path}. Empty: no path crosses, and run/start
	// in a pod is refused.
	WorkspaceVolume workspaceVolume `yaml:"workspace_volume"`
	// Stdio is how a process's stdin and stdout travel: socket (a unix
	// socket in its working directory on the workspace volume, where
	// Berth sees it and can reach it: a sidecar, or a volume on Berth's
	// node; the exec's stream otherwise) or exec (the exec's stream,
	// through the API server and the kubelet).
	Stdio string `yaml:"stdio"`
}

// workspaceVolume is kubernetes.workspace_volume: a volume's name alone
// (Berth mounts the volume where the pod does), or {name, path}.
type workspaceVolume struct {
	// Name is the volume's name in the sandbox pod's spec.volumes.
	Name string `yaml:"name"`
	// Path is where Berth mounts the same volume's root; empty: where the
	// pod's container mounts it.
	Path string `yaml:"path"`
}

// UnmarshalYAML takes the volume's name alone, or the mapping, whose keys
// are checked as strictly as the file's.
func (w *workspaceVolume) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*w = workspaceVolume{}
		return n.Decode(&w.Name)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i].Value; k != "name" && k != "path" {
			return fmt.Errorf("line %d: kubernetes.workspace_volume has no key %q: give the volume's name, or {name, path}", n.Content[i].Line, k)
		}
	}
	type plain workspaceVolume
	return n.Decode((*plain)(w))
}

func defaultKubernetesConfig() kubernetesConfig {
	return kubernetesConfig{Stdio: kubernetes.StdioSocket}
}

func (c *kubernetesConfig) options() kubernetes.Options {
	return kubernetes.Options{
		Kubeconfig: c.Kubeconfig, Namespace: c.Namespace, Container: c.Container, Sidecar: c.Sidecar,
		Workspace: kubernetes.Volume{Name: c.WorkspaceVolume.Name, Path: c.WorkspaceVolume.Path}, Stdio: c.Stdio,
	}
}

func (c *kubernetesConfig) check() error { return c.options().Check() }

// enclosureConfig is the "enclosure" section: which containers "auto"
// looks for, and whether the host may stand in.
type enclosureConfig struct {
	// Auto names the drivers "auto" asks, in order, for the one running
	// container labelled berth.conversation=<conversationId>; an engine
	// that does not answer is skipped with a log line.
	Auto []string `yaml:"auto"`
	// HostFallback lets a run without a container use Berth's own host.
	// false: no container found is an error, and "host" is refused, so no
	// tool runs outside the conversation's container (what a sandboxed
	// platform sets).
	HostFallback bool `yaml:"host_fallback"`
	// PathMap translates Berth's paths to the host's when Berth runs in a
	// container the engine does not know: directories as Berth sees them
	// and as the host has them, such as [{berth: /berth/checkout, host:
	// /home/u/src}]. Empty: Berth's own container's mounts, else Berth's
	// paths are the host's.
	PathMap []pathMapEntry `yaml:"path_map"`
	// WriteReadOnlyMounts lets lsp_rename, ast_edit and resolve write
	// files the container has on a read-only mount (a harness whose own
	// file tools write the host's copy too); false refuses such writes,
	// as the container would.
	WriteReadOnlyMounts bool `yaml:"write_read_only_mounts"`
}

type pathMapEntry struct {
	// Berth is a directory as Berth sees it (absolute).
	Berth string `yaml:"berth"`
	// Host is the same directory on the engine's host (absolute).
	Host string `yaml:"host"`
}

func defaultDockerConfig() dockerConfig {
	return dockerConfig{Dial: docker.DialRelay, Stdio: docker.StdioSocket}
}

func defaultEnclosureConfig() enclosureConfig {
	return enclosureConfig{Auto: []string{docker.Name}, HostFallback: true, PathMap: []pathMapEntry{}}
}

func (c *dockerConfig) check() error {
	if c.Dial != docker.DialRelay && c.Dial != docker.DialNetns {
		return fmt.Errorf("docker.dial %q: use %s or %s", c.Dial, docker.DialRelay, docker.DialNetns)
	}
	if c.Stdio != docker.StdioSocket && c.Stdio != docker.StdioExec {
		return fmt.Errorf("docker.stdio %q: use %s or %s", c.Stdio, docker.StdioSocket, docker.StdioExec)
	}
	return docker.CheckHost(c.Host)
}

func (c *enclosureConfig) check() error {
	for _, name := range c.Auto {
		if !slices.Contains(enclosureDrivers, name) {
			return fmt.Errorf("enclosure.auto: unknown driver %q: use %v", name, enclosureDrivers)
		}
	}
	for i, e := range c.PathMap {
		if !filepath.IsAbs(e.Berth) || !filepath.IsAbs(e.Host) {
			return fmt.Errorf("enclosure.path_map[%d]: berth %q and host %q must both be absolute paths", i, e.Berth, e.Host)
		}
	}
	return nil
}

// enclosureDrivers are the container drivers this binary has.
var enclosureDrivers = []string{docker.Name, containerd.Name, kubernetes.Name}

// enclosures builds the table run/start looks enclosures up in. No
// engine is contacted here: a machine without one starts Berth as usual,
// and "auto" skips an engine that does not answer with a log line.
func enclosures(cfg *config, log *slog.Logger) *enclosure.Lookup {
	var pathMap mounts.Table
	for _, e := range cfg.Enclosure.PathMap {
		pathMap = append(pathMap, mounts.Mount{Source: filepath.Clean(e.Host), Destination: filepath.Clean(e.Berth)})
	}
	d := docker.New(docker.Options{
		Host: cfg.Docker.Host, User: cfg.Docker.User, Dial: cfg.Docker.Dial,
		Stdio: cfg.Docker.Stdio, PathMap: pathMap, Log: log,
	})
	cd := containerd.New(containerd.Options{
		Address: cfg.Containerd.Address, Namespace: cfg.Containerd.Namespace,
		Stdio: cfg.Containerd.Stdio, PathMap: pathMap, Log: log,
	})
	ko := cfg.Kubernetes.options()
	ko.Log = log
	k := kubernetes.New(ko)
	// client-go logs through klog, to stderr in a format of its own (a
	// line for each port-forward that fails, say): Berth's log takes it.
	klog.SetSlogLogger(log.With("from", "client-go"))
	return &enclosure.Lookup{
		Host:           host.NewWith(host.Options{Log: log, Drop: cfg.Env.Drop}),
		Drivers:        map[string]enclosure.Driver{docker.Name: d, containerd.Name: cd, kubernetes.Name: k},
		Auto:           cfg.Enclosure.Auto,
		NoHostFallback: !cfg.Enclosure.HostFallback,
		Log:            log,
	}
}
