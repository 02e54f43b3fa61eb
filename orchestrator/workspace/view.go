package workspace

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/berth-dev/berth/internal/text"

	"github.com/berth-dev/berth/internal/errclass"
)

// View is how the run's enclosure sees the host's paths: a container
// shows the workdir at its mount point (/workspace), and an agent whose
// shell runs there names files by those paths. enclosure.Enclosure
// satisfies it.
type View interface {
	// MapPath turns a host path into the enclosure's.
	MapPath(hostPath string) (string, error)
	// HostPath turns an enclosure's path into the host's.
	HostPath(enclosedPath string) (string, error)
	// Writable is nil when the enclosure's processes may write the file
	// at a host path, else why not (a read-only mount).
	Writable(hostPath string) error
}

// Options are a root's ties to its run's enclosure.
type Options struct {
	// View, when set, is the enclosure whose paths the root accepts
	// beside the host's: an absolute path as the enclosure sees it is
	// mapped back with HostPath, then resolved and contained exactly as
	// a relative path is. Errors name the workdir as it sees it.
	View View
	// WriteReadOnly lets writes through to files the enclosure has on a
	// read-only mount (enclosure.write_read_only_mounts): for a harness
	// whose own file tools write the host's copy too. By default such a
	// write is refused, as it would be inside the container.
	WriteReadOnly bool
}

// NewWith is New with the run's enclosure view.
func NewWith(dir string, o Options) (*Root, error) {
	r, err := New(dir)
	if err != nil {
		return nil, err
	}
	r.opts = o
	if o.View != nil {
		if seen, err := o.View.MapPath(r.dir); err == nil && seen != r.dir {
			r.seen = filepath.Clean(seen)
		}
	}
	return r, nil
}

// fromView maps an absolute path as the enclosure sees it to the host's,
// when it is inside the workdir there: HostPath maps it through the
// container's mounts (so a path under a mount that hides part of the
// workdir, a tmpfs at /workspace/tmp, is not taken for the workdir's
// file), then it is joined to the root as the relative path it is under
// the workdir's mount point (whose source may be named through a
// symlink). ok is false for a path that does not map into the root (left
// for the caller to refuse); why, when set, says why a path under the
// workdir's mount point is not the workdir's.
func (r *Root) fromView(abs string) (_ string, ok bool, why error) {
	if r.opts.View == nil {
		return "", false, nil
	}
	h, err := r.opts.View.HostPath(abs)
	if err != nil {
		if _, under := Inside(r.seen, abs); r.seen != "" && under {
			return "", false, err
		}
		return "", false, nil
	}
	if h = filepath.Clean(h); r.contains(h) {
		return h, true, nil
	}
	if r.seen != "" {
		if rel, ok := Inside(r.seen, abs); ok {
			return filepath.Join(r.dir, filepath.FromSlash(rel)), true, nil
		}
	}
	return "", false, nil
}

// Where names the workdir in errors as the model knows it: as the
// enclosure sees it ("/workspace, the workdir as the container sees it"),
// or the host's path when the enclosure sees the host's.
func (r *Root) Where() string {
	if r.seen == "" {
		return r.dir
	}
	return r.seen + " (the working directory as the container sees it)"
}

// hidden is the error for p, under the workdir's mount point in the
// container but not the workdir's file there (a tmpfs mounted over part
// of it): why says so.
func (r *Root) hidden(p string, why error) error {
	return fmt.Errorf("path %q is not the working directory's file (%v), so it is %w %s (as the container sees it): pass a path relative to it (like \"src/main.go\")", p, why, ErrOutside, r.seen)
}

// outside is the error for a path p that leaves the root; real, when
// set, is where a symlink led it (a host path). It names the workdir as
// the enclosure sees it, and says to pass a path relative to it.
func (r *Root) outside(p, real string) error {
	how := ""
	if real != "" {
		how = " leads through a symlink to " + r.Show(real) + ","
	}
	if r.seen == "" {
		return fmt.Errorf("path %q%s is %w %s: pass a path inside it, relative to it (like \"src/main.go\") or absolute", p, how, ErrOutside, r.dir)
	}
	return fmt.Errorf("path %q%s is %w %s (as the container sees it): pass a path relative to it (like \"src/main.go\"), or an absolute one under %s", p, how, ErrOutside, r.seen, r.seen)
}

// Show is a host path as the model reads it: relative to the root when
// inside it, else as the enclosure sees it when it sees it, else the
// host's path; one with a control character is quoted (text.Path).
func (r *Root) Show(abs string) string {
	if rel, ok := Inside(r.dir, abs); ok {
		return text.Path(rel)
	}
	if r.seen != "" && r.opts.View != nil {
		if in, err := r.opts.View.MapPath(abs); err == nil {
			return text.Path(in)
		}
	}
	return text.Path(abs)
}

// Relativize rewrites, in text a program printed (a debug adapter's build
// line "Building /workspace/cmd/demo", a traceback), the workdir's
// absolute path as the enclosure sees it, and as the host sees it, into
// paths relative to the workdir, as every answer shows paths: a prefix
// "/workspace/" is dropped, and "/workspace" alone (followed by anything
// but a path character) becomes ".".
func (r *Root) Relativize(s string) string {
	for _, dir := range []string{r.seen, r.dir} {
		if dir == "" || dir == "/" || !strings.Contains(s, dir) {
			continue
		}
		s = relativize(s, dir)
	}
	return s
}

func relativize(s, dir string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, dir)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		// The prefix must start a path: not in the middle of a longer one
		// ("/x/workspace/..." or "/workspaces").
		before := i == 0 || !isPathByte(s[i-1])
		rest := s[i+len(dir):]
		switch {
		case !before:
			b.WriteString(s[:i+len(dir)])
		case strings.HasPrefix(rest, "/") && len(rest) > 1 && isPathByte(rest[1]) && rest[1] != '/':
			b.WriteString(s[:i])
			rest = rest[1:]
		case rest == "" || !isPathByte(rest[0]):
			b.WriteString(s[:i])
			b.WriteString(".")
		default:
			b.WriteString(s[:i+len(dir)])
		}
		s = rest
	}
}

// isPathByte says whether c may be part of a path as programs print them.
func isPathByte(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	case c >= 0x80:
		return true
	}
	return strings.IndexByte("/._-+@~", c) >= 0
}

// CheckWritable refuses a write to abs (a host path inside the root)
// that the enclosure could not make itself: a file on a mount the
// container has read-only, unless Options.WriteReadOnly lets it.
func (r *Root) CheckWritable(abs string) error {
	if r.opts.View == nil || r.opts.WriteReadOnly {
		return nil
	}
	if err := r.opts.View.Writable(abs); err != nil {
		return fmt.Errorf("%s is %w (%v), so Berth does not write it either: mount the workdir read-write, or set enclosure.write_read_only_mounts: true for a harness whose own file tools write the host's copy too", r.Show(abs), ErrReadOnly, err)
	}
	return nil
}

// ErrReadOnly is wrapped by CheckWritable's error: a case of permission.
var ErrReadOnly = errclass.Case("read-only in the container", errclass.ErrPermission)
