package relayexec

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/relay"
)

// ArchiveCopier is an engine with an archive API (Docker's): it copies
// the relay to relay.InstallPath without a process in the container.
type ArchiveCopier interface {
	CopyArchive(ctx context.Context, bin *relay.Binary) error
}

// Installer makes the relay runnable in containers, in the one order
// every driver follows, and remembers where it went in each container,
// so a second run there checks that one place first.
type Installer struct {
	installed sync.Map // a container's key -> the relay's path inside
}

// Install is one installation of the relay.
type Install struct {
	Key   string       // the container, in the installed map
	Where string       // the container, for errors ("docker container web")
	Run   relay.Runner // as root: the relay's directories belong to root
	// Copy, when set, is the engine's archive copy (ArchiveCopier).
	Copy ArchiveCopier
	// Found is how a copy already at relay.InstallPath got there; empty:
	// "baked into the image".
	Found string
	// Advice ends the error when nothing worked: what the container
	// lacks ("give the container sh and a writable directory that allows
	// exec").
	Advice string
	Log    *slog.Logger
}

// Install makes the relay of bin's version runnable in the container and
// returns its path there and how it got there, trying in order: where an
// earlier run put it, the copy the image carries (relay.InstallPath), an
// archive copy there (when the engine has one), and a copy streamed
// through an exec of sh (relay.Stream: where a tmpfs hides the archive
// copy, or the root is read-only). If none works its error names what it
// tried, wrapping enclosure.ErrNotSupported.
func (i *Installer) Install(ctx context.Context, in Install, bin *relay.Binary) (path, how string, err error) {
	var tried []string
	check := func(p string) bool {
		ok, why := relay.Check(ctx, in.Run, p, bin.Version)
		if !ok {
			tried = append(tried, why)
		}
		return ok
	}
	done := func(p, how string) (string, string, error) {
		i.installed.Store(in.Key, p)
		if in.Log != nil {
			in.Log.Debug("relay ready", "container", in.Where, "path", p, "how", how)
		}
		return p, how, nil
	}
	if e, ok := i.installed.Load(in.Key); ok && check(e.(string)) {
		return done(e.(string), "installed by an earlier run")
	}
	fixed := relay.InstallPath(bin.Version)
	if check(fixed) {
		return done(fixed, cmp.Or(in.Found, "baked into the image"))
	}
	if in.Copy != nil {
		if err := in.Copy.CopyArchive(ctx, bin); err != nil {
			tried = append(tried, "an archive copy to "+fixed+": "+err.Error())
		} else if ok, why := relay.Check(ctx, in.Run, fixed, bin.Version); ok {
			return done(fixed, "archive copy")
		} else {
			tried = append(tried, "an archive copy to "+fixed+", which the container does not see or cannot run (a mount over /opt/berth?): "+why)
		}
	}
	p, more, err := relay.Stream(ctx, in.Run, bin)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", in.Where, err)
	}
	if p != "" {
		return done(p, "streamed through sh")
	}
	tried = append(tried, more...)
	return "", "", fmt.Errorf("%s: Berth could not install its relay (version %s) and runs nothing without it; tried: %s. Bake it into the image at %s (as images/* do), or %s: %w",
		in.Where, bin.Version, strings.Join(tried, "; "), fixed, in.Advice, enclosure.ErrNotSupported)
}

// Into installs the relay found by find (the driver's relay, asked once)
// into c, setting c.Relay and c.RelayHow.
func (i *Installer) Into(ctx context.Context, c *Container, in Install, find func() (*relay.Binary, error)) error {
	bin, err := find()
	if err != nil {
		return err
	}
	if in.Key == "" {
		in.Key = c.Id
	}
	if in.Where == "" {
		in.Where = c.Where
	}
	c.Relay, c.RelayHow, err = i.Install(ctx, in, bin)
	return err
}
