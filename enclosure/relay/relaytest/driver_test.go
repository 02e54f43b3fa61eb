package relaytest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/berth-dev/berth/enclosure/relay"
)

// leaveEnv makes the test binary a package whose tests leave a container
// behind: its count is one more after the tests than before.
const leaveEnv = "BERTH_RELAYTEST_LEAVE"

func TestMain(m *testing.M) {
	if os.Getenv(leaveEnv) == "" {
		DriverMain(m, func(*relay.Binary) (func() (int, error), error) { return nil, nil })
	}
	n := 0
	DriverMain(m, func(*relay.Binary) (func() (int, error), error) {
		return func() (int, error) { n++; return n, nil }, nil
	})
}

// A container left behind fails the run: goleak's VerifyTestMain exits
// by itself, so a count after it never ran (review of issue 13 item 2's
// and issue 14's TestMains).
func TestDriverMainFailsOnAContainerLeftBehind(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), leaveEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), "1 before the tests, 2 after") {
		t.Fatalf("a run that left a container: %v, stderr %q; want exit 1 naming the counts", err, stderr.String())
	}
}
