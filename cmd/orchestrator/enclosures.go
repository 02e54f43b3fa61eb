package main

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/klog/v2"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/containerd"
	"github.com/berth-dev/berth/enclosure/docker"
	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/enclosure/kubernetes"
	"github.com/berth-dev/berth/enclosure/mounts"
	"github.com/berth-dev/berth/enclosure/relayexec"
	"github.com/berth-dev/berth/orchestrator"
)

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
	// ReattachGrace is how long a relay keeps its process (an eval
	// kernel) when Berth goes away without stopping it (a crash, a
	// kill -9, an OOM kill), waiting for a Berth started on the same
	// state directory (state.dir) to take it back; past it, the relay
	// ends the process's whole tree, so nothing leaks. An orderly stop
	// (run/stop, SIGTERM to Berth, the end of stdin under --stdio) ends
	// every process at once. 0 keeps nothing.
	ReattachGrace time.Duration `yaml:"reattach_grace"`
}

type pathMapEntry struct {
	// Berth is a directory as Berth sees it (absolute).
	Berth string `yaml:"berth"`
	// Host is the same directory on the engine's host (absolute).
	Host string `yaml:"host"`
}

func defaultEnclosureConfig() enclosureConfig {
	return enclosureConfig{Auto: []string{docker.Name}, HostFallback: true, PathMap: []pathMapEntry{}, ReattachGrace: orchestrator.DefaultReattachGrace}
}

func (c *enclosureConfig) check() error {
	if c.ReattachGrace < 0 {
		return fmt.Errorf("enclosure.reattach_grace must be 0 (keep nothing) or positive, got %s", c.ReattachGrace)
	}
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
	shared := relayexec.Shared{PathMap: pathMap, Log: log}
	d := docker.New(docker.Options{Config: cfg.Docker, Shared: shared})
	cd := containerd.New(containerd.Options{Config: cfg.Containerd, Shared: shared})
	k := kubernetes.New(kubernetes.Options{Config: cfg.Kubernetes, Shared: shared})
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
