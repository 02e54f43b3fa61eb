package lsp

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// pathMap carries a server's paths across the enclosure's boundary: the
// host paths Berth names become the paths (and URIs) the server sees
// (Enclosure.MapPath), and the URIs it names become files on the host
// (Enclosure.HostPath), resolved and checked to be inside the workdir
// before they are shown, read or written. It reads the workdir's files
// only through the workspace root, which changes hands with the server:
// the run's, then the pool's while it is parked, then the adopting
// run's (bind).
type pathMap struct {
	root    string              // the server's root, an absolute host path
	workdir string              // the run's working directory
	encl    enclosure.Enclosure // where the server runs: maps paths both ways
	wsRoot  atomic.Pointer[workspace.Root]

	mu   sync.Mutex // guards memo
	memo map[uri.URI]hostPath
}

// hostPath is fromURI's answer.
type hostPath struct {
	path   string
	shared bool
}

// ws is the workdir as a workspace root, to resolve the paths the server
// names (locate) and read files: its owner's.
func (m *pathMap) ws() *workspace.Root { return m.wsRoot.Load() }

// bind makes ws the root the server reads the workdir through.
func (m *pathMap) bind(ws *workspace.Root) { m.wsRoot.Store(ws) }

// maxPaths bounds the server's memo of fromURI.
const maxPaths = 4096

// folder is the server's one workspace folder, its root.
func (m *pathMap) folder() protocol.WorkspaceFolder {
	return protocol.WorkspaceFolder{URI: m.toURI(m.root), Name: filepath.Base(m.root)}
}

// mapPath turns a host path into the path the server sees
// (Enclosure.MapPath). The files Berth names are inside the workdir, which
// the enclosure always sees; a path it cannot map is sent as it is, and
// the server then says it does not know the file.
func (m *pathMap) mapPath(abs string) string {
	if p, err := m.encl.MapPath(abs); err == nil {
		return p
	}
	return abs
}

func (m *pathMap) toURI(abs string) uri.URI { return uri.File(m.mapPath(abs)) }

// fromURI turns a URI from the server into a host path
// (Enclosure.HostPath). ok is false for a path the host does not share
// with the enclosure (a container's own standard library): it is
// returned as the server named it, and is never treated as inside the
// workdir, whatever it looks like lexically.
func (m *pathMap) fromURI(u uri.URI) (p string, ok bool) {
	p = filepath.Clean(filepath.FromSlash(u.Path()))
	hp, err := m.encl.HostPath(p)
	if err != nil {
		return p, false
	}
	return hp, true
}

// pathOf is fromURI, remembered: a list of locations names the same files
// call after call, and parsing a URI is not cheap. Equal URIs get the same
// string, which makes comparing them cheap too.
func (m *pathMap) pathOf(u uri.URI) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.memo[u]
	if !ok {
		if m.memo == nil || len(m.memo) >= maxPaths {
			m.memo = map[uri.URI]hostPath{}
		}
		h.path, h.shared = m.fromURI(u)
		m.memo[u] = h
	}
	return h.path, h.shared
}

// locate turns a URI the server named into the file it is on disk
// (pathOf, then resolve: symlinks resolved at every component as
// ast_edit resolves the paths a model gives, workspace.Root). inside is
// false when that file lies outside the workdir, cannot be resolved, or
// is a path only the enclosure has: such a path is never shown, read or
// written, whatever it looks like lexically. A server that loads a folder
// through a symlink in the workdir names its files by the link. resolve
// is the workspace's Resolve, or a query's Resolver that remembers what
// it looked at.
func (m *pathMap) locate(u uri.URI, resolve func(string) (string, error)) (path string, inside bool) {
	p, shared := m.pathOf(u)
	if !shared {
		return p, false
	}
	real, err := resolve(p)
	if err != nil {
		return p, false
	}
	return real, true
}

// readFile reads a regular file inside the workdir through the
// workspace root, which refuses a path that leads out of it (also when a
// link changed since the path was resolved) and never waits on a FIFO.
func (m *pathMap) readFile(abs string) ([]byte, error) {
	b, _, err := m.ws().ReadRegular(abs, -1)
	return b, err
}

// rel is a host path relative to the workdir, as messages show it.
func (m *pathMap) rel(abs string) string { return workspace.Rel(m.workdir, abs) }

// outsideName names a file the server named that is outside the workdir:
// relative to the workdir when a symlink in it leads there, with where
// it leads.
func (m *pathMap) outsideName(p string) string {
	rel := m.rel(p)
	if rel == p {
		return m.ws().Show(p) // as the container sees it, when it does
	}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		return fmt.Sprintf("%s (a symlink leads it to %s)", text.Path(rel), m.ws().Show(real))
	}
	return text.Path(rel) + " (through a symlink)"
}

// eachSourceFile calls fn with each regular file with one of the
// extensions exts under root (skipping what workspace.SkipDir names, and links)
// and its text. It stops after maxLeftoverFiles files, and says so (cut).
// A file or folder that cannot be read is passed over, or, when strict,
// ends the walk with an error naming it.
func (m *pathMap) eachSourceFile(root string, exts map[string]string, strict bool, fn func(path string, b []byte)) (cut bool, err error) {
	files := 0
	unreadable := func(path string, e error) error {
		if !strict {
			return nil
		}
		err = fmt.Errorf("%s cannot be read (%v)", m.rel(path), e)
		return filepath.SkipAll
	}
	walkErr := filepath.WalkDir(root, func(path string, d os.DirEntry, werr error) error {
		switch {
		case werr != nil:
			return unreadable(path, werr)
		case d.IsDir():
			if path != root && workspace.SkipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		case !d.Type().IsRegular():
			return nil
		}
		if _, ok := exts[strings.ToLower(filepath.Ext(path))]; !ok {
			return nil
		}
		if files++; files > maxLeftoverFiles {
			cut = true
			return filepath.SkipAll
		}
		b, rerr := m.readFile(path)
		if rerr != nil {
			return unreadable(path, rerr)
		}
		fn(path, b)
		return nil
	})
	if err == nil && strict {
		err = walkErr
	}
	return cut, err
}
