package kubernetes

import (
	"context"
	"fmt"
	"strings"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/relay"
)

// install makes the relay of bin's version runnable in the container and
// returns its path there (relay.Install: where an earlier run put it, the
// image's copy, a copy streamed through an exec of sh, as the API server
// has no archive API). Execs run as the container's user, so a copy goes
// where that user can write and execute (relay.StreamRoots). If none
// works it names what it tried.
func (d *Driver) install(ctx context.Context, p *pod, bin *relay.Binary) (string, error) {
	earlier, _ := d.installed.Load(p.ID())
	e, _ := earlier.(string)
	path, how, tried, err := relay.Install(ctx, p.run, bin, e)
	if err != nil {
		return "", fmt.Errorf("kubernetes: %w", err)
	}
	if path == "" {
		return "", fmt.Errorf("kubernetes: %s: Berth could not install its relay (version %s) and runs nothing without it; tried: %s. Bake it into the image at %s (as images/* do), or give the container sh and a writable directory that allows exec (an emptyDir at /tmp): %w",
			p, bin.Version, strings.Join(tried, "; "), relay.InstallPath(bin.Version), enclosure.ErrNotSupported)
	}
	d.installed.Store(p.ID(), path)
	d.opts.Log.Debug("kubernetes: relay ready", "pod", p.ID(), "path", path, "how", how)
	return path, nil
}
