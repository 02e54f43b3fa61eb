package docker

import (
	"testing"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/docker/dockertest"
	"github.com/berth-dev/berth/enclosure/enclosuretest"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
)

// testLabel marks this package's containers, so the count before and
// after ignores other packages' tests running at the same time.
const testLabel = "berth.test=enclosure-docker"

// testRelay is the relay built as scripts/images builds it.
var testRelay *relay.Binary

func TestMain(m *testing.M) {
	dockertest.Main(m, testLabel, func(bin *relay.Binary) { testRelay = bin })
}

// runContainer starts a container as a harness does (labelled with the
// conversation, no network, sleeping) with extra docker run flags, and
// removes it when the test ends. It returns its id.
func runContainer(t testing.TB, conv, image string, flags ...string) string {
	t.Helper()
	args := []string{"run", "-d", "--network", "none", "--label", testLabel}
	if conv != "" {
		args = append(args, "--label", enclosure.ConversationLabel+"="+conv)
	}
	args = append(append(args, flags...), image, "sleep", "infinity")
	id := dockertest.Must(t, args...)
	t.Cleanup(func() { _, _ = dockertest.Run("rm", "-f", id) })
	return id
}

func newDriver(t testing.TB, o Options) *Driver {
	t.Helper()
	o.Shared = relaytest.WithRelay(o.Shared, testRelay)
	d := New(o)
	t.Cleanup(func() { d.Close() })
	return d
}

func attach(t testing.TB, d *Driver, id string) *container {
	t.Helper()
	return enclosuretest.Attach[*container](t, d, id)
}
