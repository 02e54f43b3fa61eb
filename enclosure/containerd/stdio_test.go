package containerd

import (
	"testing"

	"github.com/berth-dev/berth/enclosure/enclosuretest"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
)

// A process in the container that holds the socket's token (as if it
// had read it where the relay got it) and connects first is closed
// unread: only the exec's pid, as containerd gives it, may connect
// (issue 24 item 3).
func TestContainerdStdioSocketRefusesAStrangerWithTheToken(t *testing.T) {
	wd := enclosuretest.Workdir(t)
	id := run(t, "", enclosuretest.FullImage, wd)
	d := newDriver(t, Options{})
	c := attach(t, d, id)
	relaytest.StrangerWithTheToken(t, c.Container, "/workspace", wd)
	noFIFOs(t, d, id)
	onlySleep(t, id)
}
