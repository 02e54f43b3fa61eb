package docker

import (
	"context"
	"testing"

	"github.com/berth-dev/berth/enclosure/enclosuretest"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
)

// issue 24 item 1: a command run to its end in the container (the
// relay's short modes: which, version, signal) that prints without end
// costs Berth relay.MaxOutput per stream, not what it printed. Before,
// its 32 MiB were kept.
func TestRunOutputWithoutEndIsCapped(t *testing.T) {
	c := attach(t, newDriver(t, Options{}), runContainer(t, "", enclosuretest.BaseImage))
	relaytest.OutputCapped(t, func(ctx context.Context, argv []string) (relay.Result, error) {
		return c.run(ctx, argv, nil)
	})
}
