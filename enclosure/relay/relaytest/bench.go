package relaytest

import (
	"context"
	"testing"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/relay"
)

// BenchStart measures a process started in enc under the relay and
// waited for ("relay"), against the same /bin/true run by bare, an exec
// of the driver's without the relay ("bare-exec"): the relay's share of
// a start.
func BenchStart(b *testing.B, enc enclosure.Enclosure, bare relay.Runner) {
	b.Run("relay", func(b *testing.B) {
		for b.Loop() {
			p, err := enc.Start(context.Background(), enclosure.Cmd{Path: "/bin/true"})
			if err != nil {
				b.Fatal(err)
			}
			if code, err := p.Wait(); code != 0 || err != nil {
				b.Fatalf("exit %d, %v", code, err)
			}
		}
	})
	b.Run("bare-exec", func(b *testing.B) {
		for b.Loop() {
			if r, err := bare(context.Background(), []string{"/bin/true"}, nil); err != nil || r.Code != 0 {
				b.Fatalf("exit %d, %v", r.Code, err)
			}
		}
	})
}
