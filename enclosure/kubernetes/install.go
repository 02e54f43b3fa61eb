package kubernetes

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
// through an exec of sh (the API server has no archive API). Execs run as
// the container's user, so a copy goes where that user can write and
// execute (relay.StreamRoots). If none works it names what it tried.
func (d *Driver) install(ctx context.Context, p *pod, bin *relay.Binary) (string, error) {
	var tried []string
	check := func(path string) bool {
		ok, why := relay.Check(ctx, p.run, path, bin.Version)
		if !ok {
			tried = append(tried, why)
		}
		return ok
	}
	done := func(path, how string) (string, error) {
		d.installed.Store(p.ID(), path)
		d.opts.Log.Debug("kubernetes: relay ready", "pod", p.ID(), "path", path, "how", how)
		return path, nil
	}
	if path, ok := d.installed.Load(p.ID()); ok && check(path.(string)) {
		return path.(string), nil
	}
	if fixed := relay.InstallPath(bin.Version); check(fixed) {
		return done(fixed, "baked into the image")
	}
	path, more, err := relay.Stream(ctx, p.run, bin)
	if err != nil {
		return "", fmt.Errorf("kubernetes: %w", err)
	}
	tried = append(tried, more...)
	if path != "" {
		return done(path, "streamed through sh")
	}
	return "", fmt.Errorf("kubernetes: %s: Berth could not install its relay (version %s) and runs nothing without it; tried: %s. Bake it into the image at %s (as images/* do), or give the container sh and a writable directory that allows exec (an emptyDir at /tmp): %w",
		p, bin.Version, strings.Join(tried, "; "), relay.InstallPath(bin.Version), enclosure.ErrNotSupported)
}
