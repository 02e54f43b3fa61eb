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
	"github.com/berth-dev/berth/enclosure/relayexec"
)

// installUser runs the installation's execs: the relay's directories
// belong to root, whatever user the container's processes run as.
const installUser = "0"

// install makes the relay of bin's version runnable in the container and
// returns its path there (relayexec's order, with the engine's archive
// API before a copy streamed through sh). If none works it names what it
// tried; if the engine refused every exec, sh's too, it names the
// engine's reason alone.
func (d *Driver) install(ctx context.Context, c *container, bin *relay.Binary, info ctypes.InspectResponse) (string, error) {
	// refused keeps the engine's own reason when it could not start an
	// exec; everyExec says it refused every one, sh's too: then nothing
	// runs in the container, for that reason, not for a mount (a relay
	// missing at a path is refused as well, but sh still runs).
	var refused error
	everyExec := true
	asRoot := func(ctx context.Context, argv []string, stdin io.Reader) (relay.Result, error) {
		r, err := c.runAs(ctx, installUser, argv, stdin)
		er := (*execRefused)(nil)
		lastRefused := errors.As(err, &er)
		if lastRefused && refused == nil {
			refused = er
		}
		everyExec = everyExec && lastRefused
		return r, err
	}
	found := "found"
	if info.Config.Labels["berth.relay"] == relay.InstallPath(bin.Version) {
		found = "baked into the image"
	}
	p, how, err := d.installer.Install(ctx, relayexec.Install{
		Key: c.id, Where: "docker container " + c.name, Run: asRoot, Copy: c, Found: found,
		Advice: "give the container a writable directory that allows exec", Log: d.opts.Log,
	}, bin)
	if err != nil && everyExec && refused != nil {
		// Every attempt failed for that one reason: it alone is said.
		return "", fmt.Errorf("docker container %s: the engine starts no process in it: %v. Berth could not install its relay (version %s) and runs nothing without it. Fix what the engine names (a working directory deleted and re-created under a bind mount: restart the container, docker restart %s), then start a new run: %w",
			c.name, refused, bin.Version, c.name, enclosure.ErrNotSupported)
	}
	c.RelayHow = how
	return p, err
}

// CopyArchive copies the relay to relay.InstallPath with the archive
// API, as a tar rooted at / (relayexec.ArchiveCopier).
func (c *container) CopyArchive(ctx context.Context, bin *relay.Binary) error {
	return c.copyArchive(ctx, bin)
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
