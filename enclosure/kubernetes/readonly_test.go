package kubernetes

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/enclosure/mounts"
)

// A volumeMount of the workspace volume with readOnly is read-only in the
// crossing, so Writable refuses the files under it (issue 24 item 5).
func TestReadOnlyVolumeMountIsNotWritable(t *testing.T) {
	d := &Driver{opts: Options{Config: Config{Workspace: Volume{Name: "ws", Path: "/berth/ws"}}}}
	for _, ro := range []bool{true, false} {
		p := &pod{ns: "ns", name: "sandbox", container: "main"}
		k := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main",
			VolumeMounts: []corev1.VolumeMount{{Name: "ws", MountPath: "/workspace", ReadOnly: ro}}}}}}
		err := d.crossing(p, k).Writable("/berth/ws/main.go")
		if ro != errors.Is(err, mounts.ErrReadOnly) {
			t.Errorf("readOnly %v: Writable = %v", ro, err)
		}
	}
}
