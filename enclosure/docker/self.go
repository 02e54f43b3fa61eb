package docker

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strings"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/mounts"
)

// selfTable is how Berth's own paths relate to the host's, whose paths
// the container's mount sources are: enclosure.path_map when configured;
// else, when Berth runs in a container this engine knows, that
// container's mounts; else nil (Berth sees the host's paths). It is
// worked out once, when the engine first answers.
func (d *Driver) selfTable(ctx context.Context) (mounts.Table, error) {
	if len(d.opts.PathMap) > 0 {
		return d.opts.PathMap, nil
	}
	d.selfMu.Lock()
	defer d.selfMu.Unlock()
	if d.selfDone {
		return d.self, nil
	}
	id := ownContainerID(d.procSelf())
	if id == "" {
		d.selfDone = true
		return nil, nil
	}
	info, err := d.inspect(ctx, id)
	switch {
	case errors.Is(err, enclosure.ErrNotFound):
		// Berth runs in a container of another engine (or of none this
		// one knows): its paths are taken as the host's, and a workdir
		// that is not mounted says so at run/start.
		d.opts.Log.Info("docker: Berth runs in a container the engine does not know; its paths are taken as the host's (set enclosure.path_map if they are not)", "container", id)
	case err != nil:
		return nil, err
	default:
		d.self = mountTable(info)
		d.opts.Log.Info("docker: Berth runs in a container; its paths reach the host through its mounts", "container", strings.TrimPrefix(info.Name, "/"), "mounts", d.self.String())
	}
	d.selfDone = true
	return d.self, nil
}

// procSelf reads Berth's own /proc/self/mountinfo and /proc/self/cgroup,
// and its hostname.
func procSelf() (mountinfo, cgroup, hostname string) {
	m, _ := os.ReadFile("/proc/self/mountinfo")
	c, _ := os.ReadFile("/proc/self/cgroup")
	h, _ := os.Hostname()
	return string(m), string(c), h
}

// containerID finds a Docker container's id in the paths the engine gives
// a container's own files (/var/lib/docker/containers/ID/hostname, ...),
// or in a cgroup path (/docker/ID, docker-ID.scope).
var (
	mountinfoID = regexp.MustCompile(`/containers/([0-9a-f]{64})/`)
	cgroupID    = regexp.MustCompile(`(?:/docker/|docker-)([0-9a-f]{64})`)
	shortID     = regexp.MustCompile(`^[0-9a-f]{12}$`)
)

// ownContainerID returns the id of the container whose /proc/self files
// and hostname these are, or "" when they show none. mountinfo comes
// first: with cgroup v2 and a private cgroup namespace, /proc/self/cgroup
// is just "0::/", while the engine's bind mounts of /etc/hostname,
// /etc/hosts and /etc/resolv.conf name the container's directory. Last
// comes the hostname, which Docker sets to the short id unless told
// otherwise; a hostname of another shape is no id.
func ownContainerID(mountinfo, cgroup, hostname string) string {
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		switch f[4] { // the mount point
		case "/etc/hostname", "/etc/hosts", "/etc/resolv.conf":
			if m := mountinfoID.FindStringSubmatch(f[3]); m != nil { // the root within its filesystem
				return m[1]
			}
		}
	}
	if m := cgroupID.FindStringSubmatch(cgroup); m != nil {
		return m[1]
	}
	if shortID.MatchString(hostname) {
		return hostname
	}
	return ""
}
