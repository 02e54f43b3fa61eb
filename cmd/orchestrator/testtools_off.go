//go:build !berthtest

package main

import (
	"log/slog"

	"github.com/berth-dev/berth/orchestrator"
)

// addTestTools does nothing in a build without -tags berthtest: the
// test-only tools (test_exec runs any command) are not linked into such a
// binary, whatever its environment says.
func addTestTools(*orchestrator.Registry, *slog.Logger) {}
