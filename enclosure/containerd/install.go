package containerd

import (
	"context"

	"github.com/berth-dev/berth/enclosure/relayexec"
)

// install makes the relay of bin's version runnable in the container and
// returns its path there (relayexec's order; a copy is streamed through
// an exec of sh, as containerd has no copy API, and Berth never writes
// into a container's rootfs from outside: that would change the image's
// snapshot behind containerd's back). If none works it names what it
// tried.
func (d *Driver) install(ctx context.Context, c *container) (string, error) {
	bin, err := d.findRelay()
	if err != nil {
		return "", err
	}
	p, how, err := d.installer.Install(ctx, relayexec.Install{
		Key: c.id, Where: c.Where, Run: c.asRoot, Log: d.opts.Log,
		Advice: "give the container sh and a writable directory that allows exec",
	}, bin)
	c.RelayHow = how
	return p, err
}
