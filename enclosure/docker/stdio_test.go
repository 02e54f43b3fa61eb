package docker

import (
	"testing"

	"github.com/berth-dev/berth/enclosure/docker/dockertest"
	"github.com/berth-dev/berth/enclosure/enclosuretest"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
)

// A process in the container that holds the socket's token (as if it
// had read it where the relay got it) and connects first is closed
// unread: only the exec's pid, as docker exec inspect gives it, may
// connect (issue 24 item 3).
func TestStdioSocketRefusesAStrangerWithTheToken(t *testing.T) {
	wd := enclosuretest.Workdir(t)
	id := runContainer(t, "", enclosuretest.FullImage, "-v", wd+":/workspace")
	c := attach(t, newDriver(t, Options{}), id)
	relaytest.StrangerWithTheToken(t, c.Container, "/workspace", wd)
	dockertest.OnlySleep(t, id)
}
