// Package dockertest is the docker command line as the tests and
// benchmarks use it beside the Docker driver: one command's output, a
// check that an engine answers, the count of a test's containers, and
// what runs in a container (docker top).
package dockertest

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
)

// Bin is Debian's docker client, which scripts/setup installs with the
// engine (the newer client on PATH has no buildx).
const Bin = "/usr/bin/docker"

// Run runs docker with args and returns its trimmed stdout; the error
// carries its stderr.
func Run(args ...string) (string, error) {
	var stderr strings.Builder
	cmd := exec.Command(Bin, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// Must is Run, failing the test on an error.
func Must(t testing.TB, args ...string) string {
	t.Helper()
	out, err := Run(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Engine is nil when a docker engine answers, else the error that says
// how to start one: a missing engine fails a test run, never skips it.
func Engine() error {
	if _, err := Run("version", "-f", "{{.Server.APIVersion}}"); err != nil {
		return fmt.Errorf("no docker engine answers (%v): run scripts/setup, which starts one", err)
	}
	return nil
}

// Count is the number of containers, running or not, labelled label
// ("key=value"), for a test run's count before and after.
func Count(label string) (int, error) {
	out, err := Run("ps", "-aq", "--filter", "label="+label)
	if err != nil {
		return 0, err
	}
	return len(strings.Fields(out)), nil
}

// Top is what docker top lists in the container: pid and command.
func Top(t testing.TB, id string) []string {
	t.Helper()
	var ps []string
	for _, line := range strings.Split(Must(t, "top", id, "-o", "pid,args"), "\n")[1:] { // the header
		if line = strings.TrimSpace(line); line != "" {
			ps = append(ps, line)
		}
	}
	return ps
}

// OnlySleep waits (up to 20 s) until docker top shows the container's own
// "sleep infinity" alone, and fails the test with what is left otherwise.
func OnlySleep(t testing.TB, id string) {
	t.Helper()
	var ps []string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ps = Top(t, id)
		if len(ps) == 1 && strings.HasSuffix(ps[0], "sleep infinity") {
			return
		}
	}
	t.Fatalf("docker top shows more than the container's sleep: %q", ps)
}

// Main is TestMain for a package whose tests run Docker containers
// labelled label ("key=value", the package's own, so that the count
// before and after ignores other packages' tests): it builds the relay
// (relaytest.DriverMain, relaytest.Built), and fails the run when no
// engine answers or a test left a container behind.
func Main(m *testing.M, label string) {
	relaytest.DriverMain(m, func(*relay.Binary) (func() (int, error), error) {
		// A missing engine fails the run: a missing engine is never a
		// skip.
		if err := Engine(); err != nil {
			return nil, err
		}
		return func() (int, error) { return Count(label) }, nil
	})
}
