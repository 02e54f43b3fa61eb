package containerd

import (
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/containerd/containerdtest"
	"github.com/berth-dev/berth/enclosure/enclosuretest"
	"github.com/berth-dev/berth/enclosure/mounts"
	"github.com/berth-dev/berth/enclosure/relayexec"
)

// The containerd driver keeps the enclosure contract (issue 27 item 2).
// A relay with nowhere to go is declared: containerd's default spec
// mounts /run as a tmpfs that allows exec, so a container without one is
// not made on demand here; Docker and the Kubernetes stand-in run it.
func TestContainerdDriverKeepsTheEnclosureContract(t *testing.T) {
	enclosuretest.Run(t, harness{enclosuretest.Base{Driver: Name, At: "/workspace"}})
}

type harness struct{ enclosuretest.Base }

func (harness) Driver(t *testing.T, via string) enclosure.Driver {
	return newDriver(t, Options{Config: Config{Address: via}})
}

func (harness) Make(t *testing.T, o enclosuretest.Options) (string, error) {
	image := enclosuretest.FullImage
	switch o.Relay {
	case enclosuretest.RelayStreamed:
		image = enclosuretest.BaseImage
	case enclosuretest.RelayImpossible:
		return "", enclosuretest.ErrUnsupported
	}
	return run(t, o.Conversation, image, o.Workdir), nil
}

// Stop kills the task and waits until containerd says it stopped.
func (harness) Stop(t *testing.T, id string) error {
	if _, err := containerdtest.Ctr("tasks", "kill", "-s", "SIGKILL", id); err != nil {
		return err
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		out, _ := containerdtest.Ctr("tasks", "ls")
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == id && f[2] == "STOPPED" {
				return nil
			}
		}
	}
	return nil
}

func (harness) Remove(t *testing.T, id string) error {
	containerdtest.Remove(t, id)
	return nil
}

// Processes are the command lines of the task's pids, which the host
// sees as its own.
func (harness) Processes(t *testing.T, id string) []string {
	out, err := containerdtest.Ctr("tasks", "ps", id)
	if err != nil {
		return nil
	}
	var ps []string
	for _, line := range strings.Split(out, "\n")[1:] {
		if f := strings.Fields(line); len(f) > 0 {
			if b, err := os.ReadFile("/proc/" + f[0] + "/cmdline"); err == nil {
				ps = append(ps, strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " "))
			}
		}
	}
	return ps
}

func (harness) Engine() (string, string, error) { return "unix", containerdtest.Address(), nil }

// Misled is a driver whose enclosure.path_map points Berth elsewhere.
func (harness) Misled(t *testing.T, wd, elsewhere string, log *slog.Logger) (enclosure.Driver, error) {
	return newDriver(t, Options{Shared: relayexec.Shared{PathMap: mounts.Table{{Source: wd, Destination: elsewhere}}, Log: log}}), nil
}
