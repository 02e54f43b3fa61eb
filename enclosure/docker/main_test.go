package docker

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure"
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
		if out, err := exec.Command("docker", "version", "-f", "{{.Server.APIVersion}}").CombinedOutput(); err != nil {
			return nil, fmt.Errorf("no docker engine answers (%v: %s): run scripts/setup, which starts one", err, out)
		}
		return testContainers, nil
	})
}

// testContainers counts the containers labelled testLabel.
func testContainers() (int, error) {
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label="+testLabel).Output()
	if err != nil {
		return 0, fmt.Errorf("docker ps: %w", err)
	}
	return len(strings.Fields(string(out))), nil
}

// docker runs the docker command line and returns its trimmed stdout.
func docker(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, msg)
	}
	return strings.TrimSpace(string(out))
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
	id := docker(t, args...)
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", id).Run() })
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

// processes is what docker top lists in the container: pid and command.
func processes(t testing.TB, id string) []string {
	t.Helper()
	var ps []string
	for _, line := range strings.Split(docker(t, "top", id, "-o", "pid,args"), "\n")[1:] {
		if line = strings.TrimSpace(line); line != "" {
			ps = append(ps, line)
		}
	}
	return ps
}

// onlySleep waits (bounded) until docker top shows the container's own
// sleep alone, and fails the test with what is left otherwise.
func onlySleep(t testing.TB, id string) {
	t.Helper()
	var ps []string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ps = processes(t, id)
		if len(ps) == 1 && strings.HasSuffix(ps[0], "sleep infinity") {
			return
		}
	}
	t.Fatalf("docker top shows more than the container's sleep: %q", ps)
}
