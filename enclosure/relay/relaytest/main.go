package relaytest

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/berth-dev/berth/enclosure/relay"
)

// UseRelay builds the relay into a temporary directory and points
// $BERTH_RELAY at it, so that the host enclosure runs every process of the
// test binary under it, as an installed Berth does. Call it from TestMain
// before any test starts a process; the returned func removes the build.
func UseRelay() (cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "berth-relay-")
	if err != nil {
		return nil, err
	}
	b, err := Build(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := os.Setenv(relay.EnvPath, b.Path); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("setting %s: %w", relay.EnvPath, err)
	}
	return func() { os.RemoveAll(dir) }, nil
}

// Run runs the tests of a package that starts host processes under a
// relay built for them (UseRelay), then checks that no goroutine leaked,
// as goleak.VerifyTestMain does. It returns the exit code, for a TestMain
// with its own set-up and clean-up around it.
func Run(m *testing.M) int {
	cleanup, err := UseRelay()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	cleanup()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "leaked goroutines:", err)
			code = 1
		}
	}
	return code
}

// Main is TestMain for such a package: Run, then exit with its code.
func Main(m *testing.M) { os.Exit(Run(m)) }
