// Package relaytest builds the relay for tests of the enclosure drivers,
// exactly as scripts/images builds the copy the images carry, so that a
// test's relay has the images' version whenever cmd/berth-relay has not
// changed since they were built.
package relaytest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relayexec"
)

// Build builds cmd/berth-relay into dir and opens it.
func Build(dir string) (*relay.Binary, error) {
	out := filepath.Join(dir, relay.Name)
	// The flags of scripts/images: static, no paths, no VCS stamp, so
	// that the version (the binary's hash) is reproducible.
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build",
		"-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", out,
		"github.com/berth-dev/berth/cmd/berth-relay")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the relay: %v\n%s", err, b)
	}
	return relay.Open(out)
}

// WithRelay is s with bin as its relay, unless s names one.
func WithRelay(s relayexec.Shared, bin *relay.Binary) relayexec.Shared {
	if s.Relay == nil {
		s.Relay = func() (*relay.Binary, error) { return bin, nil }
	}
	return s
}
