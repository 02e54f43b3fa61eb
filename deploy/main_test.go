package deploy_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The tests start processes and clients; none of their goroutines may
// outlive them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
