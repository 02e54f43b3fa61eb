package lsp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.lsp.dev/protocol"

	"github.com/berth-dev/berth/orchestrator/workspace"
)

// fileStamps is what the files a server reads were like when it was
// parked: the size and modification time of each file under its root with
// one of its extensions or named as one of its root markers. Nobody
// watches the files while a server is parked, and Berth is its only
// client, so the run that adopts it tells it what changed meanwhile
// (workspace/didChangeWatchedFiles): a file the agent added, changed or
// removed between two runs is not missing from the next run's answers.
type fileStamps map[string]stamp

type stamp struct {
	size int64
	mod  time.Time
}

// maxStampedFiles bounds the files stamped under one root: past it, files
// beyond the walk's first maxStampedFiles are not compared.
const maxStampedFiles = 50000

// stampFiles stamps the files of cfg's languages and root markers under
// root, skipping what workspace.SkipDir names, and links.
func stampFiles(root string, cfg ServerConfig) fileStamps {
	out := fileStamps{}
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil
		case d.IsDir():
			if p != root && workspace.SkipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		case !d.Type().IsRegular():
			return nil
		}
		if _, ok := cfg.Extensions[strings.ToLower(filepath.Ext(p))]; !ok && !slices.Contains(cfg.RootMarkers, d.Name()) {
			return nil
		}
		st, err := d.Info()
		if err != nil {
			return nil
		}
		out[p] = stamp{st.Size(), st.ModTime()}
		if len(out) >= maxStampedFiles {
			return filepath.SkipAll
		}
		return nil
	})
	return out
}

// changes lists, sorted by path, what differs from was to now: files
// created, changed (size or time), and deleted.
func (was fileStamps) changes(now fileStamps) []fileChange {
	var out []fileChange
	for p, st := range now {
		old, ok := was[p]
		switch {
		case !ok:
			out = append(out, fileChange{p, protocol.FileChangeTypeCreated})
		case old.size != st.size || !old.mod.Equal(st.mod):
			out = append(out, fileChange{p, protocol.FileChangeTypeChanged})
		}
	}
	for p := range was {
		if _, ok := now[p]; !ok {
			out = append(out, fileChange{p, protocol.FileChangeTypeDeleted})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

// baseline is what a parked server knows of its files: their stamps
// when it was parked, or, for one a Berth took back without them (a run
// owned it, or they were too many to record), only that it knew the
// disk as of since.
type baseline struct {
	stamps fileStamps // nil: known by time alone
	since  time.Time
}

// changes lists, sorted by path, what differs from b in now: against the
// stamps, the files created, changed and deleted; by time, the files
// changed since (told as changed: a file created is one the server did
// not know, and a deletion is not seen).
func (b baseline) changes(now fileStamps) []fileChange {
	if b.stamps != nil {
		return b.stamps.changes(now)
	}
	var out []fileChange
	for p, st := range now {
		if !st.mod.Before(b.since) {
			out = append(out, fileChange{p, protocol.FileChangeTypeChanged})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

// fileChange is one file's change while its server was parked.
type fileChange struct {
	path string
	kind protocol.FileChangeType
}

// tellChanges tells the server the files that changed on disk while it
// was parked.
func (s *server) tellChanges(ctx context.Context, cs []fileChange) error {
	if len(cs) == 0 {
		return nil
	}
	events := make([]protocol.FileEvent, len(cs))
	for i, c := range cs {
		events[i] = protocol.FileEvent{URI: s.paths.toURI(c.path), Type: c.kind}
	}
	return s.proc.api.DidChangeWatchedFiles(ctx, &protocol.DidChangeWatchedFilesParams{Changes: events})
}

// encode is the stamps as keptServer.Stamps has them.
func (fs fileStamps) encode(root string) string {
	lines := make([]string, 0, len(fs))
	for p, st := range fs {
		rel, err := filepath.Rel(root, p)
		if err != nil {
			continue
		}
		lines = append(lines, fmt.Sprintf("%d %d %s", st.size, st.mod.UnixNano(), filepath.ToSlash(rel)))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// decodeStamps reads keptServer.Stamps, paths under root.
func decodeStamps(root, text string) (fileStamps, error) {
	out := fileStamps{}
	if text == "" {
		return out, nil
	}
	for line := range strings.SplitSeq(text, "\n") {
		f := strings.SplitN(line, " ", 3)
		if len(f) != 3 {
			return nil, fmt.Errorf("a stamp %.60q is not size, time and path", line)
		}
		size, err1 := strconv.ParseInt(f[0], 10, 64)
		mod, err2 := strconv.ParseInt(f[1], 10, 64)
		rel := filepath.FromSlash(f[2])
		if err1 != nil || err2 != nil || !filepath.IsLocal(rel) {
			return nil, fmt.Errorf("a stamp %.60q is not size, time and a path under the root", line)
		}
		out[filepath.Join(root, rel)] = stamp{size, time.Unix(0, mod)}
	}
	return out, nil
}
