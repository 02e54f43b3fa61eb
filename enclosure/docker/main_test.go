package docker

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/docker/dockertest"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
)

// testLabel marks this package's containers, so the count before and
// after ignores other packages' tests running at the same time.
const testLabel = "berth.test=enclosure-docker"

// Images the tests run, as scripts/images builds them.
const (
	fullImage = "berth/full:dev"
	baseImage = "berth/base:bookworm" // no relay
)

// testRelay is the relay built as scripts/images builds it.
var testRelay *relay.Binary

func TestMain(m *testing.M) {
	relaytest.DriverMain(m, func(bin *relay.Binary) (func() (int, error), error) {
		testRelay = bin
		// A missing engine fails the run: these tests are the driver's.
		if err := dockertest.Engine(); err != nil {
			return nil, err
		}
		return func() (int, error) { return dockertest.Count(testLabel) }, nil
	})
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

// workdir is a fresh directory for a container to mount.
func workdir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func newDriver(t testing.TB, o Options) *Driver {
	t.Helper()
	if o.Relay == nil {
		o.Relay = func() (*relay.Binary, error) { return testRelay, nil }
	}
	d := New(o)
	t.Cleanup(func() { d.Close() })
	return d
}

func attach(t testing.TB, d *Driver, id string) *container {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	enc, err := d.Attach(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return enc.(*container)
}
