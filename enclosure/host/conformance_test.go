package host

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/enclosuretest"
)

// The host enclosure keeps the enclosure contract (issue 27 item 2). It
// cannot be stopped, removed or have a silent engine, and carries no
// relay to install: the harness declares those, and the Kubernetes
// stand-in runs them.
func TestHostKeepsTheEnclosureContract(t *testing.T) {
	enclosuretest.Run(t, harness{enclosuretest.Base{Driver: "host"}})
}

type harness struct{ enclosuretest.Base }

func (harness) Driver(t *testing.T, via string) enclosure.Driver { return driver{New()} }

func (harness) Make(t *testing.T, o enclosuretest.Options) (string, error) {
	if o.Relay != enclosuretest.RelayBaked {
		return "", enclosuretest.ErrUnsupported
	}
	return ID, nil
}

func (harness) Stop(*testing.T, string) error   { return enclosuretest.ErrUnsupported }
func (harness) Remove(*testing.T, string) error { return enclosuretest.ErrUnsupported }
func (harness) Engine() (string, string, error) { return "", "", enclosuretest.ErrUnsupported }

// Processes are every process's command line on the host.
func (harness) Processes(t *testing.T, _ string) []string {
	var ps []string
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
			ps = append(ps, strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " "))
		}
	}
	return ps
}

// driver attaches to the host alone, as run/start's "host" does.
type driver struct{ host *Enclosure }

func (driver) Name() string { return "host" }

func (d driver) Attach(_ context.Context, id string) (enclosure.Enclosure, error) {
	if id != ID {
		return nil, fmt.Errorf("no host enclosure %q: %w", id, enclosure.ErrNotFound)
	}
	return d.host, nil
}

func (driver) Find(context.Context, string) ([]string, error) { return nil, nil }

func (harness) Misled(*testing.T, string, string, *slog.Logger) (enclosure.Driver, error) {
	return nil, enclosuretest.ErrUnsupported
}
