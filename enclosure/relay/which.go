package relay

import (
	"context"
	"fmt"
	"strconv"
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

// Memory asks the relay, through run, for the resident memory in bytes of
// what the relay tagged tag runs (MemArgs).
func Memory(ctx context.Context, run Runner, relayPath, tag, where string) (int64, error) {
	r, err := run(ctx, MemArgs(relayPath, tag), nil)
	if err != nil {
		return 0, err
	}
	if r.Code != 0 {
		return 0, fmt.Errorf("%s: relay mem: exit %d: %s", where, r.Code, strings.TrimSpace(r.Stderr))
	}
	n, err := strconv.ParseInt(strings.TrimSpace(r.Stdout), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: relay mem printed %q, not a number of bytes", where, strings.TrimSpace(r.Stdout))
	}
	return n, nil
}
