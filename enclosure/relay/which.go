package relay

import (
	"context"
	"fmt"
	"strings"

	"github.com/berth-dev/berth/enclosure"
)

// Which asks the relay at relayPath, through run (as the container's own
// user, whose PATH every exec gets), where the executable name is; where
// names the container for the errors ("docker container web"). A name
// not on the PATH is an error wrapping enclosure.ErrNotFound.
func Which(ctx context.Context, run Runner, relayPath, name, where string) (string, error) {
	r, err := run(ctx, WhichArgs(relayPath, name), nil)
	if err != nil {
		return "", err
	}
	switch r.Code {
	case 0:
		return strings.TrimSpace(r.Stdout), nil
	case 1:
		if strings.HasPrefix(name, "/") {
			return "", fmt.Errorf("%s: no executable file there in %s (%s): install it in the image, or name the program where it is: %w",
				name, where, strings.TrimSpace(strings.TrimPrefix(r.Stderr, "berth-relay: which: ")), enclosure.ErrNotFound)
		}
		return "", fmt.Errorf("%s: executable not found in %s (%s): install it in the image, or give its absolute path: %w",
			name, where, strings.TrimSpace(strings.TrimPrefix(r.Stderr, "berth-relay: which: ")), enclosure.ErrNotFound)
	}
	return "", fmt.Errorf("%s: relay which %s: exit %d: %s", where, name, r.Code, strings.TrimSpace(r.Stderr))
}
