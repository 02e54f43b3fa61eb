package hosttest

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
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
	b, err := relaytest.Build(dir)
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

// Main is TestMain for a package whose tests start host processes: it
// runs them under a relay built for them (UseRelay) and then checks that
// no goroutine leaked, as goleak.VerifyTestMain does.
func Main(m *testing.M) {
	cleanup, err := UseRelay()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	cleanup()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}
