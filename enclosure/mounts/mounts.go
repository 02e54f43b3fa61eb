// Package mounts maps paths across a container's mounts, both ways, with
// the same rules and errors for every driver: Docker's inspect Mounts,
// containerd's OCI spec mounts and a Kubernetes pod's volume mounts all
// become a Table. Berth's own view of the host, when it runs in a
// container itself, is a Table too (its own mounts, or enclosure.path_map).
package mounts

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/berth-dev/berth/enclosure"

	"github.com/berth-dev/berth/internal/errclass"
)

// Mount is one mount: Source is the path outside (on the host), and
// Destination where it appears inside. A mount without a Source (a tmpfs)
// maps nothing, but hides whatever lies under its Destination. ReadOnly
// is a mount the container's processes cannot write through (Docker's
// RW false, an OCI mount's "ro" option, a volumeMount's readOnly).
type Mount struct {
	Source      string
	Destination string
	ReadOnly    bool
}

// Table is a container's mounts.
type Table []Mount

// Inside maps a path outside to the path it has inside: the mount whose
// Source is the longest prefix of p wins, provided no other mount hides
// the result (a tmpfs or another bind mounted beneath its Destination).
// A path no mount shows is an error wrapping enclosure.ErrNotFound.
func (t Table) Inside(p string) (string, error) {
	q, _, err := t.inside(p)
	return q, err
}

// inside is Inside that also returns the mount that shows the path.
func (t Table) inside(p string) (string, Mount, error) {
	p, err := clean(p)
	if err != nil {
		return "", Mount{}, err
	}
	candidates := slices.SortedFunc(slices.Values(t.indexes()), func(a, b int) int {
		return cmp.Compare(len(t[b].Source), len(t[a].Source))
	})
	var hidden []string
	for _, i := range candidates {
		m := t[i]
		rest, ok := under(p, m.Source)
		if m.Source == "" || !ok {
			continue
		}
		q := join(m.Destination, rest)
		if j := t.owner(q); j != i {
			hidden = append(hidden, fmt.Sprintf("%s is hidden by the mount at %s", q, t[j].Destination))
			continue
		}
		return q, m, nil
	}
	if len(hidden) > 0 {
		return "", Mount{}, fmt.Errorf("%s is not visible inside: %s (mounts: %s): %w", p, strings.Join(hidden, "; "), t, enclosure.ErrNotFound)
	}
	return "", Mount{}, fmt.Errorf("%s is not under any mount's source (mounts: %s): %w", p, t, enclosure.ErrNotFound)
}

// Outside maps a path inside to the path outside: the mount whose
// Destination is the longest prefix of p holds it. A path under no mount,
// or under one without a Source, is an error wrapping enclosure.ErrNotFound.
func (t Table) Outside(p string) (string, error) {
	p, err := clean(p)
	if err != nil {
		return "", err
	}
	i := t.owner(p)
	if i < 0 {
		return "", fmt.Errorf("%s is not under any mount (mounts: %s): %w", p, t, enclosure.ErrNotFound)
	}
	m := t[i]
	if m.Source == "" {
		return "", fmt.Errorf("%s is under %s, a mount with no host path (a tmpfs): %w", p, m.Destination, enclosure.ErrNotFound)
	}
	rest, _ := under(p, m.Destination)
	return join(m.Source, rest), nil
}

// String lists the mounts as "source -> destination", for errors.
func (t Table) String() string {
	if len(t) == 0 {
		return "none"
	}
	parts := make([]string, len(t))
	for i, m := range t {
		src := m.Source
		if src == "" {
			src = "(tmpfs)"
		}
		parts[i] = src + " -> " + m.Destination
		if m.ReadOnly {
			parts[i] += " (read-only)"
		}
	}
	return strings.Join(parts, ", ")
}

// owner is the index of the mount whose Destination is the longest prefix
// of p (the one whose files p names), or -1.
func (t Table) owner(p string) int {
	best := -1
	for i, m := range t {
		if _, ok := under(p, m.Destination); ok && (best < 0 || len(m.Destination) > len(t[best].Destination)) {
			best = i
		}
	}
	return best
}

func (t Table) indexes() []int {
	idx := make([]int, len(t))
	for i := range idx {
		idx[i] = i
	}
	return idx
}

func clean(p string) (string, error) {
	if !path.IsAbs(p) {
		return "", fmt.Errorf("%q is not an absolute path: %w", p, enclosure.ErrInvalidConfig)
	}
	return path.Clean(p), nil
}

// under says whether p is root or below it, and returns the rest ("" for
// root itself). root "" is under nothing.
func under(p, root string) (string, bool) {
	if root == "" {
		return "", false
	}
	root = path.Clean(root)
	if p == root {
		return "", true
	}
	if root == "/" {
		return p[1:], true
	}
	rest, ok := strings.CutPrefix(p, root+"/")
	return rest, ok
}

func join(root, rest string) string {
	if rest == "" {
		return path.Clean(root)
	}
	return path.Join(root, rest)
}

// Crossing is the way between Berth's paths and a container's: through
// Berth's own mounts (or enclosure.path_map) to the host's path, then
// through the container's mounts; and back. Every container driver maps
// its MapPath and HostPath through one.
type Crossing struct {
	// Self maps host paths to Berth's own; nil when Berth sees the
	// host's paths.
	Self Table
	// Container maps host paths to the container's.
	Container Table
	// Name names the container in errors ("docker container web").
	Name string
	// Mount says how to bind-mount a host path (its one %s) into such a
	// container, for the error of a path that is not mounted.
	Mount string
	// Unusable, when set, says why no path crosses at all (the driver's
	// configuration names no shared volume, or the container does not
	// mount it): Inside and Outside return it, and Writable is nil.
	Unusable error
}

// Inside is a path as Berth sees it turned into the container's.
func (c Crossing) Inside(berthPath string) (string, error) {
	if c.Unusable != nil {
		return "", c.Unusable
	}
	host := berthPath
	if c.Self != nil {
		h, err := c.Self.Outside(berthPath)
		if err != nil {
			return "", fmt.Errorf("Berth's path %s has no host path through Berth's own mounts: %w; mount it into Berth's container, or set enclosure.path_map", berthPath, err)
		}
		host = h
	}
	in, err := c.Container.Inside(host)
	if err != nil {
		return "", fmt.Errorf("%s is not mounted into %s: %w; bind-mount the workdir into it (%s)", berthPath, c.Name, err, fmt.Sprintf(c.Mount, host))
	}
	return in, nil
}

// Writable says whether the container's processes may write the file at
// a path as Berth sees it: nil when the mount that shows it is writable,
// else an error wrapping ErrReadOnly that names the mount.
func (c Crossing) Writable(berthPath string) error {
	if c.Unusable != nil {
		return nil
	}
	host := berthPath
	if c.Self != nil {
		h, err := c.Self.Outside(berthPath)
		if err != nil {
			return nil // not in the container at all: MapPath says so
		}
		host = h
	}
	q, m, err := c.Container.inside(host)
	if err != nil || !m.ReadOnly {
		return nil
	}
	return fmt.Errorf("%s is on a %w of %s at %s", q, ErrReadOnly, c.Name, m.Destination)
}

// ErrReadOnly is wrapped by Writable's error for a path on a read-only
// mount.
// A case of permission.
var ErrReadOnly = errclass.Case("read-only mount", errclass.ErrPermission)

// Outside is Inside's inverse: a path as the container sees it turned
// into Berth's.
func (c Crossing) Outside(enclosedPath string) (string, error) {
	if c.Unusable != nil {
		return "", c.Unusable
	}
	host, err := c.Container.Outside(enclosedPath)
	if err != nil {
		return "", fmt.Errorf("%s: %w", c.Name, err)
	}
	if c.Self == nil {
		return host, nil
	}
	p, err := c.Self.Inside(host)
	if err != nil {
		return "", fmt.Errorf("%s: host path %s: Berth does not see it: %w", c.Name, host, err)
	}
	return p, nil
}
