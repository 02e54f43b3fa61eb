package containerd

import (
	"context"
	"fmt"
	"strings"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/relay"
)

// install makes the relay of bin's version runnable in the container and
// returns its path there (relay.Install: where an earlier run put it, the
// image's copy, a copy streamed through an exec of sh, as containerd has
// no copy API, and Berth never writes into a container's rootfs from
// outside: that would change the image's snapshot behind containerd's
// back). If none works it names what it tried.
func (d *Driver) install(ctx context.Context, c *container, bin *relay.Binary) (string, error) {
	earlier, _ := d.installed.Load(c.id)
	e, _ := earlier.(string)
	p, how, tried, err := relay.Install(ctx, c.asRoot, bin, e)
	if err != nil {
		return "", fmt.Errorf("containerd: %w", err)
	}
	if p == "" {
		return "", fmt.Errorf("containerd container %s: Berth could not install its relay (version %s) and runs nothing without it; tried: %s. Bake it into the image at %s (as images/* do), or give the container sh and a writable directory that allows exec: %w",
			c.id, bin.Version, strings.Join(tried, "; "), relay.InstallPath(bin.Version), enclosure.ErrNotSupported)
	}
	d.installed.Store(c.id, p)
	d.opts.Log.Debug("containerd: relay ready", "container", c.id, "path", p, "how", how)
	return p, nil
}
