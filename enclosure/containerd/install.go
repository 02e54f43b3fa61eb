package containerd

import (
	"context"
	"fmt"
	"strings"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/relay"
)

// install makes the relay of bin's version runnable in the container and
// returns its path there, trying in order: where an earlier run put it,
// the copy the image carries (relay.InstallPath), and a copy streamed
// through an exec of sh (containerd has no copy API, and Berth never
// writes into a container's rootfs from outside: that would change the
// image's snapshot behind containerd's back). If none works it names what
// it tried.
func (d *Driver) install(ctx context.Context, c *container, bin *relay.Binary) (string, error) {
	var tried []string
	check := func(p string) bool {
		ok, why := relay.Check(ctx, c.asRoot, p, bin.Version)
		if !ok {
			tried = append(tried, why)
		}
		return ok
	}
	done := func(p, how string) (string, error) {
		d.installed.Store(c.id, p)
		d.opts.Log.Debug("containerd: relay ready", "container", c.id, "path", p, "how", how)
		return p, nil
	}
	if p, ok := d.installed.Load(c.id); ok && check(p.(string)) {
		return p.(string), nil
	}
	if fixed := relay.InstallPath(bin.Version); check(fixed) {
		return done(fixed, "baked into the image")
	}
	p, more, err := relay.Stream(ctx, c.asRoot, bin)
	if err != nil {
		return "", fmt.Errorf("containerd: %w", err)
	}
	tried = append(tried, more...)
	if p != "" {
		return done(p, "streamed through sh")
	}
	return "", fmt.Errorf("containerd container %s: Berth could not install its relay (version %s) and runs nothing without it; tried: %s. Bake it into the image at %s (as images/* do), or give the container sh and a writable directory that allows exec: %w",
		c.id, bin.Version, strings.Join(tried, "; "), relay.InstallPath(bin.Version), enclosure.ErrNotSupported)
}
