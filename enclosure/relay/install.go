package relay

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
)

// Result is the end of a command a driver ran to its end in a container.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// MaxOutput bounds what a Runner keeps of each of a command's stdout and
// stderr: the relay's short modes print a line, and a relay replaced in
// the container could print without end (issue 24 item 1). The rest is
// read and dropped, and the kept part ends with a note of its size.
const MaxOutput = 1 << 20

// Runner runs argv to its end in a container, with stdin written and
// then closed when it is not nil. err is for the engine's failures; the
// command's own are in Result.Code. Check and Stream need one that runs
// as root (the relay's directories belong to root, whatever user the
// container's processes run as).
type Runner func(ctx context.Context, argv []string, stdin io.Reader) (Result, error)

// StreamRoots are where Stream puts the relay: the images' own root (a
// tmpfs mounted over it hides a copy made beneath it), then the usual
// writable tmpfs mounts of a read-only container. A root mounted noexec
// fails the version check and the next is tried.
var StreamRoots = []string{"/opt/berth", "/tmp/.berth", "/dev/shm/.berth", "/run/.berth", "/var/tmp/.berth"}

// PrepareScript makes the directory "$1" and checks that it is writable:
// Stream's look before it streams. Run it as: sh -c PrepareScript sh DIR.
const PrepareScript = `mkdir -p "$1" && [ -w "$1" ] && t="$1/.berth-probe.$$" && : > "$t" && rm -f "$t"`

// StreamScript writes stdin to "$1/berth-relay" through a temporary file
// and a rename, so a run that starts it at the same time never sees half
// a binary. Run it as: sh -c StreamScript sh DIR.
const StreamScript = `set -e; mkdir -p "$1"; t="$1/.berth-relay.$$"; cat > "$t"; chmod 755 "$t"; mv -f "$t" "$1/berth-relay"`

// Check runs "p version" and says whether it printed want; when not, why,
// for the error that lists what was tried.
func Check(ctx context.Context, run Runner, p, want string) (bool, string) {
	r, err := run(ctx, VersionArgs(p), nil)
	switch {
	case err != nil:
		return false, p + ": " + err.Error()
	case r.Code != 0:
		note := ""
		if s := strings.TrimSpace(r.Stderr); s != "" {
			note = ": " + s
		}
		return false, fmt.Sprintf("%s: cannot run (exit %d%s)", p, r.Code, note)
	case strings.TrimSpace(r.Stdout) != want:
		return false, fmt.Sprintf("%s is version %s, not %s", p, strings.TrimSpace(r.Stdout), want)
	}
	return true, ""
}

// Stream copies bin into the container through an exec of sh, under each
// of StreamRoots in turn, and returns the path of the first copy that
// runs with the right version. When none does, it returns what it tried.
// It is the way in for an engine with no copy API (containerd) and for a
// container whose copy the engine's API cannot reach (a tmpfs over it).
func Stream(ctx context.Context, run Runner, bin *Binary) (string, []string, error) {
	raw, err := os.ReadFile(bin.Path)
	if err != nil {
		return "", nil, fmt.Errorf("reading the relay: %w", err)
	}
	var tried []string
	for _, root := range StreamRoots {
		dir := InstallDir(root, bin.Version)
		p := dir + "/" + Name
		// The directory is made first, with no stdin: a shell that fails
		// while megabytes wait on its stdin stalls some engines' exec
		// until its timeout (a real kubelet, whose copy into the dead
		// shell's stdin blocks), and a read-only root fails every root.
		if r, err := run(ctx, []string{"sh", "-c", PrepareScript, "sh", dir}, nil); err != nil || r.Code != 0 {
			why := ""
			if err != nil {
				why = err.Error()
			} else {
				why = fmt.Sprintf("exit %d: %s", r.Code, strings.TrimSpace(r.Stderr))
			}
			tried = append(tried, "making "+dir+" for it through sh: "+why)
			continue
		}
		r, err := run(ctx, []string{"sh", "-c", StreamScript, "sh", dir}, bytes.NewReader(raw))
		switch {
		case err != nil:
			tried = append(tried, "streaming it to "+p+" through sh: "+err.Error())
			continue
		case r.Code != 0:
			tried = append(tried, fmt.Sprintf("streaming it to %s through sh: exit %d: %s", p, r.Code, strings.TrimSpace(r.Stderr)))
			continue
		}
		ok, why := Check(ctx, run, p, bin.Version)
		if ok {
			return p, tried, nil
		}
		tried = append(tried, fmt.Sprintf("streaming it to %s through sh worked, but it does not run there (a noexec mount?): %s", p, why))
	}
	return "", tried, nil
}
