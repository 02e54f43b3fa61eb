package docker

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/docker/dockertest"
	"github.com/berth-dev/berth/enclosure/enclosuretest"
	"github.com/berth-dev/berth/enclosure/mounts"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
	"github.com/berth-dev/berth/enclosure/relayexec"
)

// testLabel marks this package's containers, so the count before and
// after ignores other packages' tests running at the same time.
const testLabel = "berth.test=enclosure-docker"

func TestMain(m *testing.M) {
	dockertest.Main(m, testLabel)
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
	d := New(Options{Config: o.Config, Shared: relaytest.WithRelay(o.Shared, relaytest.Built())})
	t.Cleanup(func() { d.Close() })
	return d
}

func attach(t testing.TB, d *Driver, id string) *container {
	t.Helper()
	return enclosuretest.Attach[*container](t, d, id)
}

// The Docker driver keeps the enclosure contract (issue 27 item 2).
func TestDockerDriverKeepsTheEnclosureContract(t *testing.T) {
	enclosuretest.Run(t, harness{enclosuretest.Base{Driver: Name, At: "/workspace"}})
}

// harness is the conformance suite's Docker: containers made as a
// harness makes them, on the tests' engine.
type harness struct{ enclosuretest.Base }

func (harness) Driver(t *testing.T, via string) enclosure.Driver {
	o := Options{}
	if via != "" {
		o.Host = "unix://" + via
	}
	return newDriver(t, o)
}

func (harness) Make(t *testing.T, o enclosuretest.Options) (string, error) {
	image, flags := enclosuretest.FullImage, []string{}
	switch o.Relay {
	case enclosuretest.RelayStreamed:
		image = enclosuretest.BaseImage
		flags = append(flags, "--tmpfs", "/opt/berth:exec") // hides an archive copy: streamed
	case enclosuretest.RelayImpossible:
		image = enclosuretest.BaseImage
		flags = append(flags, "--read-only", "--tmpfs", "/tmp")
	}
	if o.Workdir != "" {
		flags = append(flags, "-v", o.Workdir+":/workspace")
	}
	return runContainer(t, o.Conversation, image, flags...), nil
}

func (harness) Stop(t *testing.T, id string) error {
	_, err := dockertest.Run("kill", id)
	return err
}

func (harness) Remove(t *testing.T, id string) error {
	_, err := dockertest.Run("rm", "-f", id)
	return err
}

func (harness) Processes(t *testing.T, id string) []string {
	out, err := dockertest.Run("top", id, "-o", "pid,args")
	if err != nil {
		return nil // stopped: nothing runs
	}
	return strings.Split(out, "\n")[1:]
}

func (harness) Engine() (string, string, error) { return "unix", "/var/run/docker.sock", nil }

// Misled is a driver whose enclosure.path_map points Berth elsewhere.
func (harness) Misled(t *testing.T, wd, elsewhere string, log *slog.Logger) (enclosure.Driver, error) {
	return newDriver(t, Options{Shared: relayexec.Shared{PathMap: mounts.Table{{Source: wd, Destination: elsewhere}}, Log: log}}), nil
}
