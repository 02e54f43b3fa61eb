package docker

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure/relay"
)

// issue 24 item 1: a command run to its end in the container (the
// relay's short modes: which, version, signal) that prints without end
// costs Berth relay.MaxOutput per stream, not what it printed. Before,
// its 32 MiB were kept.
func TestRunOutputWithoutEndIsCapped(t *testing.T) {
	c := attach(t, newDriver(t, Options{}), runContainer(t, "", baseImage))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res, err := c.run(ctx, []string{"sh", "-c", "head -c 33554432 /dev/zero; head -c 33554432 /dev/zero >&2"}, nil)
	runtime.ReadMemStats(&after)
	if err != nil || res.Code != 0 {
		t.Fatalf("run: %v %+v", err, res.Code)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("32 MiB on stdout and on stderr: allocated %d MiB, kept %d and %d bytes", alloc>>20, len(res.Stdout), len(res.Stderr))
	for _, out := range []string{res.Stdout, res.Stderr} {
		if len(out) > relay.MaxOutput+100 || !strings.HasSuffix(out, "... (31 MiB more not kept)") {
			t.Errorf("kept %d bytes, ending %q", len(out), out[max(0, len(out)-40):])
		}
	}
}
