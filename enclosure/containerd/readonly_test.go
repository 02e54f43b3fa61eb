package containerd

import (
	"errors"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-dev/berth/enclosure/mounts"
)

// A bind mount whose OCI options hold "ro" is read-only in the table, so
// Writable refuses the files under it (issue 24 item 5).
func TestReadOnlyBindIsNotWritable(t *testing.T) {
	c := mounts.Crossing{Name: "web", Container: mountTable([]specs.Mount{
		{Source: "/host/wd", Destination: "/workspace", Type: "bind", Options: []string{"rbind", "ro"}},
		{Source: "/host/out", Destination: "/out", Type: "bind", Options: []string{"rbind", "rw"}},
	})}
	if err := c.Writable("/host/wd/main.go"); !errors.Is(err, mounts.ErrReadOnly) {
		t.Errorf("Writable(on a bind with ro) = %v, want ErrReadOnly", err)
	}
	if err := c.Writable("/host/out/x"); err != nil {
		t.Errorf("Writable(on a bind with rw) = %v, want nil", err)
	}
}
