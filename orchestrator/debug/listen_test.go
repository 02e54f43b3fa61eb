package debug

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/host"
)

// counter counts what is written to it; the drain goes on writing after
// the port is found.
type counter struct{ n atomic.Int64 }

func (c *counter) Write(p []byte) (int, error) { c.n.Add(int64(len(p))); return len(p), nil }

// issue 24 item 1: an adapter that prints a 64 MiB line before it names
// its port costs a bounded amount of memory, and its port is still found;
// the line goes on to its output as it came. Before, the line was read
// whole (ReadString('\n')).
func TestAdapterLongLineBeforeItsPortIsCapped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	proc, err := host.New().Start(ctx, enclosure.Cmd{Path: "sh", Args: []string{"-c",
		`head -c 67108864 /dev/zero | tr '\0' x; echo; echo 'DAP server listening at: 127.0.0.1:4711'; exec sleep 30`}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = proc.Kill(); _, _ = proc.Wait() }()
	var rest counter
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	port, err := listenPort(ctx, proc, &rest)
	runtime.ReadMemStats(&after)
	if err != nil || port != 4711 {
		t.Fatalf("port %d, %v", port, err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("a 64 MiB line before the port: allocated %d KiB, passed on %d bytes", alloc>>10, rest.n.Load())
	if alloc > 8<<20 {
		t.Errorf("allocated %d MiB reading the adapter's output: want under 8 MiB", alloc>>20)
	}
	if rest.n.Load() != 64<<20+1 {
		t.Errorf("passed on %d bytes of output, want the 64 MiB line and its newline", rest.n.Load())
	}
}
