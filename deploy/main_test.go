package deploy_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// builtDir holds what the tests build once for all of them (buildBerth).
var builtDir string

// The tests start processes and clients; none of their goroutines may
// outlive them.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "berth-deploy-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	builtDir = dir
	goleak.VerifyTestMain(removing{m, dir})
}

// removing runs the tests, then removes dir.
type removing struct {
	m   *testing.M
	dir string
}

func (r removing) Run() int {
	defer os.RemoveAll(r.dir)
	return r.m.Run()
}
