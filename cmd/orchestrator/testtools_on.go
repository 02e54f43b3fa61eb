//go:build berthtest

package main

import (
	"log/slog"
	"os"

	"github.com/berth-dev/berth/cmd/orchestrator/internal/testtools"
	"github.com/berth-dev/berth/orchestrator"
)

// testToolsEnv turns on the test-only tools (read, write and exec tools
// that echo, write, run, panic, sleep, serialise and start a child) used by
// the end-to-end tests. Only a binary built with -tags berthtest has them
// at all; even there a run sees them only with the variable set, so the
// tests of the real surface see the real surface.
const testToolsEnv = "BERTH_TEST_TOOLS"

func addTestTools(reg *orchestrator.Registry, log *slog.Logger) {
	if os.Getenv(testToolsEnv) == "1" {
		log.Warn("test-only tools are registered (" + testToolsEnv + "=1)")
		reg.Add(testtools.New())
	}
}
