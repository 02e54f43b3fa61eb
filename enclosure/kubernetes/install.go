package kubernetes

import (
	"context"

	"github.com/berth-dev/berth/enclosure/relayexec"
)

// install makes the relay of bin's version runnable in the container and
// returns its path there (relayexec's order; a copy is streamed through
// an exec of sh, as the API server has no archive API). Execs run as the
// container's user, so a copy goes where that user can write and execute
// (relay.StreamRoots). If none works it names what it tried.
func (d *Driver) install(ctx context.Context, p *pod) (string, error) {
	bin, err := d.findRelay()
	if err != nil {
		return "", err
	}
	path, how, err := d.installer.Install(ctx, relayexec.Install{
		Key: p.key(), Where: p.Where, Run: p.run, Log: d.opts.Log,
		Advice: "give the container sh and a writable directory that allows exec (an emptyDir at /tmp)",
	}, bin)
	p.RelayHow = how
	return path, err
}
