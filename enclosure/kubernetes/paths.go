package kubernetes

import (
	"cmp"
	"fmt"
	"path"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/mounts"
)

// crossing is the way between Berth's paths and the container's, through
// the workspace volume (kubernetes.workspace_volume), which both mount:
// Berth at Volume.Path, the container at each of its volumeMounts of it.
// Its Unusable, when set, says why no path crosses (no volume configured,
// or the container does not mount it), for MapPath's error: run/start
// refuses the workspace with it.
//
// It builds the table from the container's volumeMounts: a mount of
// the workspace volume has Berth's path of it as its source (with its
// subPath: a sandbox pod that mounts its conversation's directory of a
// shared claim); every other mount hides what lies under it. A mount with
// a subPathExpr is not mapped (its directory is known to the kubelet
// only).
func (d *Driver) crossing(p *pod, k *corev1.Pod) mounts.Crossing {
	v := d.opts.Workspace
	c := mounts.Crossing{
		Name:  p.String(),
		Mount: "put %s on the volume kubernetes.workspace_volume names (" + v.Name + "), which Berth mounts at " + cmp.Or(v.Path, "the container's mount path"),
	}
	if v.Name == "" {
		c.Unusable = fmt.Errorf("%s: kubernetes.workspace_volume is not set, so Berth cannot see the pod's files: put the workspace on a volume both mount (an emptyDir of the pod when Berth is its sidecar, else a ReadWriteMany claim) and name it in kubernetes.workspace_volume: %w", p, enclosure.ErrNotFound)
		return c
	}
	var vms []corev1.VolumeMount
	all := slices.Concat(k.Spec.Containers, k.Spec.InitContainers) // an init container: a native sidecar
	if i := slices.IndexFunc(all, func(ctr corev1.Container) bool { return ctr.Name == p.container }); i >= 0 {
		vms = all[i].VolumeMounts
	}
	mounted := false
	for _, m := range vms {
		src := ""
		if m.Name == v.Name && m.SubPathExpr == "" {
			mounted = true
			// Berth's path of the volume's root, then the part of the
			// volume the container mounts.
			src = path.Join(cmp.Or(v.Path, m.MountPath), m.SubPath)
		}
		c.Container = append(c.Container, mounts.Mount{Source: src, Destination: m.MountPath, ReadOnly: m.ReadOnly})
	}
	if !mounted {
		c.Unusable = fmt.Errorf("%s does not mount the workspace volume %q (kubernetes.workspace_volume) (mounts: %s): add a volumeMount of it to the container, or name the volume it does mount: %w", p, v.Name, c.Container, enclosure.ErrNotFound)
	}
	return c
}
