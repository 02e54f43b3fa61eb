package docker

import (
	"errors"
	"testing"

	ctypes "github.com/moby/moby/api/types/container"

	"github.com/berth-dev/berth/enclosure/mounts"
)

// A bind mount inspect reports with RW false is read-only in the table,
// so Writable refuses the files under it (issue 24 item 5).
func TestReadOnlyBindIsNotWritable(t *testing.T) {
	c := mounts.Crossing{Name: "web", Container: mountTable(ctypes.InspectResponse{Mounts: []ctypes.MountPoint{
		{Source: "/host/wd", Destination: "/workspace", RW: false},
		{Source: "/host/out", Destination: "/out", RW: true},
	}})}
	if err := c.Writable("/host/wd/main.go"); !errors.Is(err, mounts.ErrReadOnly) {
		t.Errorf("Writable(on a bind with RW false) = %v, want ErrReadOnly", err)
	}
	if err := c.Writable("/host/out/x"); err != nil {
		t.Errorf("Writable(on a bind with RW true) = %v, want nil", err)
	}
}
