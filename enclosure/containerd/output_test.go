package containerd

import (
	"context"
	"io"
	"testing"

	"github.com/berth-dev/berth/enclosure/enclosuretest"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
)

// issue 24 item 1: a command run to its end in the container (the
// relay's short modes) that prints without end costs Berth
// relay.MaxOutput per stream, not what it printed. Before, its 32 MiB
// were kept.
func TestRunOutputWithoutEndIsCapped(t *testing.T) {
	c := attach(t, newDriver(t, Options{}), run(t, "", enclosuretest.BaseImage, ""))
	relaytest.OutputCapped(t, func(ctx context.Context, argv []string) (relay.Result, error) {
		return c.run(ctx, nil, argv, nil)
	})
}

// zeros is an endless stream of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// issue 24 item 1: what is left in an exited process's FIFO is drained
// into memory; a writer that outlived the process and writes on is read
// to its end but kept to maxDrain. Before, all of it was kept.
func TestDrainAfterExitIsCapped(t *testing.T) {
	s := &stream{fifo: io.LimitReader(zeros{}, 64<<20)}
	s.drain()
	if len(s.rest) != maxDrain || s.fifo != nil {
		t.Fatalf("kept %d bytes, want %d", len(s.rest), maxDrain)
	}
	b, err := io.ReadAll(s)
	if len(b) != maxDrain || err != nil {
		t.Errorf("read back %d bytes, %v", len(b), err)
	}
}
