package debug

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// paths carries paths across the enclosure's boundary. The adapter sees
// the enclosure's paths: toAdapter (Enclosure.MapPath) turns a host path
// into one, toHost (Enclosure.HostPath) turns one back; nil is the host's
// identity. A path coming back is mapped, resolved (symlinks included)
// and checked to be inside the workdir before it is shown relative to it
// or read.
type paths struct {
	root *workspace.Root // the workdir
	// anywhere lets files outside the working directory be read (the host
	// enclosure: its paths are Berth's).
	anywhere  bool
	toAdapter func(string) (string, error)
	toHost    func(string) (string, error)
}

// show is the path the model reads: relative to the workdir when inside
// it, else as the adapter named it.
// A path with a control character in it is quoted (text.Path): it could
// otherwise print a line of its own.
func (p paths) show(path string) string {
	if rel, _, ok := p.inside(path); ok {
		return text.Path(rel)
	}
	return text.Path(path)
}

// adapter is a host path as the adapter sees it.
func (p paths) adapter(hostPath string) (string, error) {
	if p.toAdapter == nil {
		return hostPath, nil
	}
	return p.toAdapter(hostPath)
}

// shown is what the adapter or the program printed as an answer shows
// it: the workdir's paths (as the container sees them: "Building
// /workspace/internal/demo") relative to it, as every other path is, and
// control characters other than newlines and tabs escaped.
func (p paths) shown(out string) string {
	return text.Message(p.relative(out))
}

// relative is an adapter's message (an unverified breakpoint's "could not
// find file /workspace/app.py", a stop's description) with the workdir's
// paths relative to it, as every answer shows paths.
func (p paths) relative(msg string) string {
	if p.root == nil {
		return msg
	}
	return p.root.Relativize(msg)
}

// host is an adapter's path as Berth sees it; ok is false for a path the
// host does not share with the enclosure.
func (p paths) host(path string) (string, bool) {
	if p.toHost == nil {
		return filepath.Clean(path), true
	}
	h, err := p.toHost(path)
	return h, err == nil
}

// inside is an adapter's path relative to the workdir and as the file it
// is on the host, when it is inside the workdir.
func (p paths) inside(path string) (rel, abs string, ok bool) {
	h, ok := p.host(path)
	if !ok || p.root == nil {
		return "", "", false
	}
	abs, err := p.root.Resolve(h)
	if err != nil {
		return "", "", false
	}
	return p.root.Rel(abs), abs, true
}

// maxSource bounds the source file a line is shown from.
const maxSource = 8 << 20

// sourceLine is line n (1-based) of the adapter's path, trimmed, or "".
// A file inside the workdir is read through it (a link never leads out);
// one outside only on the host (anywhere).
func (p paths) sourceLine(path string, n int) string {
	if path == "" || n <= 0 {
		return ""
	}
	var text []byte
	if _, abs, ok := p.inside(path); ok {
		b, _, err := p.root.ReadRegular(abs, maxSource)
		if err != nil {
			return ""
		}
		text = b
	} else if h, ok := p.host(path); ok && p.anywhere {
		f, err := openRegular(h)
		if err != nil {
			return ""
		}
		defer f.Close()
		if text, err = io.ReadAll(io.LimitReader(f, maxSource)); err != nil {
			return ""
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for i := 1; sc.Scan(); i++ {
		if i == n {
			return cutValue(strings.TrimSpace(sc.Text()))
		}
	}
	return ""
}

// location is "file:line in name" and note, with the source line
// beneath, or the frame name when the adapter gave no source.
func (p paths) location(path string, line int, name, note string) string {
	name = text.Line(name)
	if path == "" {
		return fmt.Sprintf("%s (no source available)%s", name, note)
	}
	loc := fmt.Sprintf("%s:%d", p.show(path), line)
	if name != "" {
		loc += " in " + name
	}
	loc += note
	if src := p.sourceLine(path, line); src != "" {
		loc += fmt.Sprintf("\n  %d | %s", line, src)
	}
	return loc
}
