package vibe

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/host/hosttest"
)

// A worker in an enclosure that sees the workdir at another path, as a
// container sees it at its mount, starts in that path, not in the host's
// (issue 13 item 4).
func TestWorkerThroughAMappedWorkdir(t *testing.T) {
	var m *hosttest.Mapped
	f := newFixtureIn(t, config([]string{"/bin/sh", "-c", "cat data.txt"}, nil), func(dir string) enclosure.Enclosure {
		if err := os.WriteFile(filepath.Join(dir, "data.txt"), []byte("from the workdir\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		m = hosttest.NewMapped(t, dir)
		return m
	})
	f.ok(t, "vibe_spawn", obj{"brief": "read it", "label": "reader"}, "Spawned worker w1")
	f.ok(t, "vibe_wait", obj{"worker_id": "w1"}, "succeeded", "from the workdir")
	cmds := m.Cmds()
	if len(cmds) != 1 || cmds[0].Dir != m.View {
		t.Fatalf("workers started as %+v, want one in the mapped workdir %s", cmds, m.View)
	}
}
