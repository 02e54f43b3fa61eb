package relay_test

import (
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relay/wire"
)

// lines is an endless stderr of short lines.
type lines struct{ i int }

func (l *lines) Read(p []byte) (int, error) {
	const line = "berth-relay: noise\n"
	for n := range p {
		p[n] = line[l.i%len(line)]
		l.i++
	}
	return len(p), nil
}

// issue 24 item 1: a dial's stderr that never ends (a relay replaced in
// the container) is read to its end, but only its first 4 KiB are kept
// for the error. Before, every line was kept: 16 MiB of stderr allocated
// 104 MiB.
func TestDialStderrWithoutEndIsCapped(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ready := relay.DialReady(io.MultiReader(strings.NewReader(wire.ReadyLine+"\n"), io.LimitReader(&lines{}, 16<<20)))
	if err := <-ready; err != nil {
		t.Fatalf("ready: %v", err)
	}
	err := <-ready
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("16 MiB of stderr: allocated %d MiB, kept %d bytes", alloc>>20, len(err.Error()))
	if len(err.Error()) > 8<<10 || !strings.HasSuffix(err.Error(), "more lines not kept)") {
		t.Errorf("kept %d bytes, ending %q", len(err.Error()), err.Error()[max(0, len(err.Error())-60):])
	}
	if alloc > 16<<20 {
		t.Errorf("allocated %d MiB reading the dial's stderr: want under 16 MiB", alloc>>20)
	}
}
