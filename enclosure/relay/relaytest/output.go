package relaytest

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure/relay"
)

// OutputCapped runs, through run, a command that prints 32 MiB on
// stdout and on stderr, as a relay's short mode (which, version, signal)
// that prints without end would, and checks that each stream is kept to
// relay.MaxOutput and says how much was dropped (issue 24 item 1).
func OutputCapped(t *testing.T, run func(ctx context.Context, argv []string) (relay.Result, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res, err := run(ctx, []string{"sh", "-c", "head -c 33554432 /dev/zero; head -c 33554432 /dev/zero >&2"})
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
