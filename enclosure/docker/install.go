package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"

	ctypes "github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/relay"
)

// streamRoots are where the relay is streamed through an exec of sh when
// the archive copy cannot be seen: the images' own root (a tmpfs mounted
// over it hides the copy the engine made beneath), then the usual
// writable tmpfs mounts of a read-only container. A root mounted noexec
// (Docker's --tmpfs default) fails the version check and the next is
// tried.
var streamRoots = []string{"/opt/berth", "/tmp/.berth", "/dev/shm/.berth", "/run/.berth", "/var/tmp/.berth"}

// installUser runs the installation's execs: the relay's directories
// belong to root, whatever user the container's processes run as.
const installUser = "0"

// install makes the relay of bin's version runnable in the container and
// returns its path there, trying in order: the copy the image carries
// (or an earlier run put there), a copy made with the archive API, and a
// copy streamed through an exec of sh. If none works it names what it
// tried.
func (d *Driver) install(ctx context.Context, c *container, bin *relay.Binary, info ctypes.InspectResponse) (string, error) {
	var tried []string
	if p, ok := d.installed.Load(c.id); ok {
		if ok, _ := c.hasRelay(ctx, p.(string), bin.Version); ok {
			c.relayHow = "installed by an earlier run"
			return p.(string), nil
		}
	}
	done := func(p, how string) (string, error) {
		d.installed.Store(c.id, p)
		c.relayHow = how
		d.opts.Log.Debug("docker: relay ready", "container", c.name, "path", p, "how", how)
		return p, nil
	}
	fixed := relay.InstallPath(bin.Version)
	ok, why := c.hasRelay(ctx, fixed, bin.Version)
	if ok {
		how := "found"
		if info.Config.Labels["berth.relay"] == fixed {
			how = "baked into the image"
		}
		return done(fixed, how)
	}
	tried = append(tried, "the image's copy at "+fixed+" ("+why+")")
	if err := c.copyArchive(ctx, bin); err != nil {
		tried = append(tried, "an archive copy to "+fixed+" ("+err.Error()+")")
	} else if ok, why := c.hasRelay(ctx, fixed, bin.Version); ok {
		return done(fixed, "archive copy")
	} else {
		tried = append(tried, "an archive copy to "+fixed+", which the container does not see ("+why+"; a mount over /opt/berth?)")
	}
	raw, err := os.ReadFile(bin.Path)
	if err != nil {
		return "", fmt.Errorf("docker: reading the relay: %w", err)
	}
	for _, root := range streamRoots {
		dir := relay.InstallDir(root, bin.Version)
		p := dir + "/" + relay.Name
		r, err := c.runAs(ctx, installUser, []string{"sh", "-c", streamScript, "sh", dir}, bytes.NewReader(raw))
		if err == nil && r.code != 0 {
			err = fmt.Errorf("exit %d%s", r.code, stderrNote(r.stderr))
		}
		if err != nil {
			tried = append(tried, "streaming it to "+p+" through sh ("+err.Error()+")")
			continue
		}
		ok, why := c.hasRelay(ctx, p, bin.Version)
		if ok {
			return done(p, "streamed through sh")
		}
		tried = append(tried, "streaming it to "+p+", where it cannot run ("+why+"; a noexec mount?)")
	}
	return "", fmt.Errorf("docker container %s: Berth could not install its relay (version %s) and runs nothing without it; tried: %s. Bake it into the image at %s (as images/* do), or give the container a writable directory that allows exec: %w",
		c.name, bin.Version, strings.Join(tried, "; "), fixed, enclosure.ErrNotSupported)
}

// streamScript writes stdin to "$1/berth-relay" through a temporary file
// and a rename, so a run that starts it at the same time never sees half
// a binary.
const streamScript = `set -e; mkdir -p "$1"; t="$1/.berth-relay.$$"; cat > "$t"; chmod 755 "$t"; mv -f "$t" "$1/berth-relay"`

// hasRelay runs "p version" and says whether it printed want; when not,
// what happened instead, for the error that lists what was tried.
func (c *container) hasRelay(ctx context.Context, p, want string) (bool, string) {
	r, err := c.runAs(ctx, installUser, relay.VersionArgs(p), nil)
	switch {
	case err != nil:
		return false, err.Error()
	case r.code != 0:
		return false, fmt.Sprintf("exit %d%s", r.code, stderrNote(r.stderr))
	case strings.TrimSpace(r.stdout) != want:
		return false, "version " + strings.TrimSpace(r.stdout)
	}
	return true, ""
}

func stderrNote(s string) string {
	if s = strings.TrimSpace(s); s != "" {
		return ": " + s
	}
	return ""
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
