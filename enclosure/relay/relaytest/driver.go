package relaytest

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/berth-dev/berth/enclosure/relay"
)

// built is the relay DriverMain built.
var built *relay.Binary

// Built is the relay DriverMain built for the package's tests.
func Built() *relay.Binary { return built }

// DriverMain is TestMain for a package that hands the relay to a driver
// (and for the relay's own): it builds the relay into a temporary
// directory and passes it to setup, which checks the engine (a missing
// one fails the run) and returns what counts the package's containers
// (nil: nothing to count). It then runs m under goleak and exits non-zero
// when a test failed, a goroutine was left, or the tests left a
// container behind (the count after differs from the count before).
func DriverMain(m *testing.M, setup func(*relay.Binary) (count func() (int, error), err error)) {
	dir, err := os.MkdirTemp("", "berth-relay-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	bin, err := Build(dir)
	if err != nil {
		fail(err)
	}
	built = bin
	count, err := setup(bin)
	if err != nil {
		fail(err)
	}
	if count == nil {
		count = func() (int, error) { return 0, nil }
	}
	before, err := count()
	if err != nil {
		fail(err)
	}
	// goleak exits through Cleanup, with m's code made 1 when a goroutine
	// is left: the count after the tests must run there.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		// Fewer after is another user's container gone (a developer's
		// machine shared with other work), not one of ours left.
		if after, err := count(); err != nil || after > before {
			fmt.Fprintf(os.Stderr, "the tests' containers: %d before the tests, %d after (%v): a test left one behind\n", before, after, err)
			code = 1
		}
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}
