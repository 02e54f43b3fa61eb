package main

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/containerd"
	"github.com/berth-dev/berth/enclosure/docker"
	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/enclosure/mounts"
)

// dockerConfig is the "docker" section: how Berth reaches the Docker
// engine and runs processes in its containers.
type dockerConfig struct {
	// Host is the engine's address; empty: $DOCKER_HOST, else
	// unix:///var/run/docker.sock.
	Host string `yaml:"host"`
	// User runs processes as this user; empty: the container's default.
	User string `yaml:"user"`
	// Dial is how a port inside is reached: relay (an exec; works with
	// --network none, no privileges) or netns (Berth enters the
	// container's network namespace: root on the engine's host).
	Dial string `yaml:"dial"`
}

// containerdConfig is the "containerd" section: how Berth reaches
// containerd, for containers made without Docker (nerdctl, Kubernetes'
// CRI, a harness's ctr).
type containerdConfig struct {
	// Address is containerd's socket.
	Address string `yaml:"address"`
	// Namespace holds the containers: default, or k8s.io (CRI); Docker's
	// own (moby) is refused, its containers are the docker driver's.
	Namespace string `yaml:"namespace"`
}

func defaultContainerdConfig() containerdConfig {
	return containerdConfig{Address: containerd.DefaultAddress, Namespace: containerd.DefaultNamespace}
}

func (c *containerdConfig) check() error {
	if !filepath.IsAbs(c.Address) {
		return fmt.Errorf("containerd.address %q: use the absolute path of containerd's socket, such as %s", c.Address, containerd.DefaultAddress)
	}
	return containerd.CheckNamespace(c.Namespace)
}

// enclosureConfig is the "enclosure" section: which containers "auto"
// looks for, and whether the host may stand in.
type enclosureConfig struct {
	// Auto names the drivers "auto" asks, in order, for the running
	// container labelled berth.conversation=<conversationId>.
	Auto []string `yaml:"auto"`
	// HostFallback lets a run without a container use Berth's own host.
	// false: no container is an error, and "host" is refused.
	HostFallback bool `yaml:"host_fallback"`
	// PathMap translates Berth's paths to the host's when Berth runs in a
	// container the engine does not know (otherwise its own mounts are
	// used).
	PathMap []pathMapEntry `yaml:"path_map"`
}

type pathMapEntry struct {
	Berth string `yaml:"berth"` // a directory as Berth sees it
	Host  string `yaml:"host"`  // the same directory on the engine's host
}

func defaultDockerConfig() dockerConfig { return dockerConfig{Dial: docker.DialRelay} }

func defaultEnclosureConfig() enclosureConfig {
	return enclosureConfig{Auto: []string{docker.Name}, HostFallback: true, PathMap: []pathMapEntry{}}
}

func (c *dockerConfig) check() error {
	if c.Dial != docker.DialRelay && c.Dial != docker.DialNetns {
		return fmt.Errorf("docker.dial %q: use %s or %s", c.Dial, docker.DialRelay, docker.DialNetns)
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
var enclosureDrivers = []string{docker.Name, containerd.Name}

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
		PathMap: pathMap, Log: log,
	})
	cd := containerd.New(containerd.Options{
		Address: cfg.Containerd.Address, Namespace: cfg.Containerd.Namespace,
		PathMap: pathMap, Log: log,
	})
	return &enclosure.Lookup{
		Host:           host.NewWith(host.Options{Log: log, Drop: cfg.Env.Drop}),
		Drivers:        map[string]enclosure.Driver{docker.Name: d, containerd.Name: cd},
		Auto:           cfg.Enclosure.Auto,
		NoHostFallback: !cfg.Enclosure.HostFallback,
		Log:            log,
	}
}
