package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	ctypes "github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/relay"
)

// installUser runs the installation's execs: the relay's directories
// belong to root, whatever user the container's processes run as.
const installUser = "0"

// install makes the relay of bin's version runnable in the container and
// returns its path there, trying in order: the copy the image carries
// (or an earlier run put there), a copy made with the archive API, and a
// copy streamed through an exec of sh (relay.Stream: where a tmpfs hides
// the archive copy, or the root is read-only). If none works it names
// what it tried.
func (d *Driver) install(ctx context.Context, c *container, bin *relay.Binary, info ctypes.InspectResponse) (string, error) {
	// refused keeps the engine's own reason when it could not start an
	// exec; everyExec says it refused every one, sh's too: then nothing
	// runs in the container, for that reason, not for a mount (a relay
	// missing at a path is refused as well, but sh still runs).
	var refused error
	everyExec, lastRefused := true, false
	asRoot := func(ctx context.Context, argv []string, stdin io.Reader) (relay.Result, error) {
		r, err := c.runAs(ctx, installUser, argv, stdin)
		er := (*execRefused)(nil)
		lastRefused = errors.As(err, &er)
		if lastRefused && refused == nil {
			refused = er
		}
		everyExec = everyExec && lastRefused
		return r, err
	}
	done := func(p, how string) (string, error) {
		d.installed.Store(c.id, p)
		c.relayHow = how
		d.opts.Log.Debug("docker: relay ready", "container", c.name, "path", p, "how", how)
		return p, nil
	}
	if p, ok := d.installed.Load(c.id); ok {
		if ok, _ := relay.Check(ctx, asRoot, p.(string), bin.Version); ok {
			c.relayHow = "installed by an earlier run"
			return p.(string), nil
		}
	}
	var tried []string
	fixed := relay.InstallPath(bin.Version)
	ok, why := relay.Check(ctx, asRoot, fixed, bin.Version)
	if ok {
		how := "found"
		if info.Config.Labels["berth.relay"] == fixed {
			how = "baked into the image"
		}
		return done(fixed, how)
	}
	tried = append(tried, "the image's copy: "+why)
	if err := c.copyArchive(ctx, bin); err != nil {
		tried = append(tried, "an archive copy to "+fixed+": "+err.Error())
	} else if ok, why := relay.Check(ctx, asRoot, fixed, bin.Version); ok {
		return done(fixed, "archive copy")
	} else if lastRefused {
		tried = append(tried, "an archive copy to "+fixed+", which the engine could not start: "+why)
	} else {
		tried = append(tried, "an archive copy to "+fixed+", which the container does not see (a mount over /opt/berth?): "+why)
	}
	p, more, err := relay.Stream(ctx, asRoot, bin)
	if err != nil {
		return "", fmt.Errorf("docker: %w", err)
	}
	if p != "" {
		return done(p, "streamed through sh")
	}
	tried = append(tried, more...)
	if everyExec && refused != nil {
		// Every attempt failed for that one reason: it alone is said.
		return "", fmt.Errorf("docker container %s: the engine starts no process in it: %v. Berth could not install its relay (version %s) and runs nothing without it. Fix what the engine names (a working directory deleted and re-created under a bind mount: restart the container, docker restart %s), then start a new run: %w",
			c.name, refused, bin.Version, c.name, enclosure.ErrNotSupported)
	}
	return "", fmt.Errorf("docker container %s: Berth could not install its relay (version %s) and runs nothing without it; tried: %s. Bake it into the image at %s (as images/* do), or give the container a writable directory that allows exec: %w",
		c.name, bin.Version, strings.Join(tried, "; "), fixed, enclosure.ErrNotSupported)
}

// copyArchive copies the relay to relay.InstallPath with the archive
// API, as a tar rooted at /.
func (c *container) copyArchive(ctx context.Context, bin *relay.Binary) error {
	raw, err := os.ReadFile(bin.Path)
	if err != nil {
		return err
	}
	dir := strings.TrimPrefix(relay.InstallDir("/opt/berth", bin.Version), "/")
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{
		{Typeflag: tar.TypeDir, Name: "opt/berth/", Mode: 0o755},
		{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755},
		{Typeflag: tar.TypeReg, Name: dir + "/" + relay.Name, Mode: 0o755, Size: int64(len(raw))},
	} {
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
	}
	if _, err := tw.Write(raw); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	_, err = c.cli.CopyToContainer(ctx, c.id, client.CopyToContainerOptions{DestinationPath: "/", Content: &buf})
	return err
}
