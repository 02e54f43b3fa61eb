package lsp

import (
	"errors"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/berth-dev/berth/orchestrator/workspace"
)

// docStore is what a server was last told of each file it has open.
// Its lock guards the documents; order is held across a whole sync, so
// the notifications for a file go out in version order.
type docStore struct {
	order sync.Mutex
	mu    sync.Mutex
	open  map[string]*document // by absolute host path
	last  string               // the file synced last: tsserver's probe asks about its project
	tick  uint64               // counts uses, for document.used
	// reopen: the documents the runs that owned the server used, the
	// most recently used first, for the run that adopts it to reopen
	// (closeDocuments makes it, reopenList reads it); epoch counts the
	// parkings, so that a reopen for a run that has ended opens nothing
	// (server.reopen). Both are guarded by order.
	reopen []string
	epoch  uint64
	// warming is the document a warm-up opened and will close again,
	// until anything else syncs it (syncLocked clears it); guarded by
	// order.
	warming string
}

// document is a file as the server was last told about it.
type document struct {
	version int32
	text    string
	syncSeq uint64    // the publish counter (diagStore.count) before this version was sent
	size    int64     // the file's size and modification time when read,
	mod     time.Time // to skip reading it again while they hold
	lines   []string  // text split into lines, made when first asked (docStore.lines)
	// used is docStore.tick when a call was last about the file or wrote
	// it (touch), 0 for never; rank is its place, from 1, in the list a
	// reopen opened it from (0: it was not reopened). recent orders by
	// them.
	used uint64
	rank int
}

// unchanged returns the open document of abs when the file still has the
// size and modification time it was read at, and notes it synced last.
func (ds *docStore) unchanged(abs string, size int64, mod time.Time) (document, bool) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	d, open := ds.open[abs]
	if !open || d.size != size || !d.mod.Equal(mod) {
		return document{}, false
	}
	ds.last = abs
	return *d, true
}

// update records text as the content of abs read at size and mod, to be
// sent after the publish counter read seq: version 1 when it was not open
// (opened), the next version when the text differs (changed), else the
// same version.
func (ds *docStore) update(abs, text string, size int64, mod time.Time, seq uint64) (doc document, opened, changed bool) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	d, open := ds.open[abs]
	switch {
	case !open:
		if ds.open == nil {
			ds.open = map[string]*document{}
		}
		d = &document{version: 1, text: text, syncSeq: seq}
		ds.open[abs] = d
	case d.text != text:
		d.version++
		d.text, d.syncSeq, d.lines, changed = text, seq, nil, true
	}
	d.size, d.mod = size, mod
	ds.last = abs
	return *d, !open, changed
}

// forget drops abs and says whether it was open.
func (ds *docStore) forget(abs string) bool {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	_, open := ds.open[abs]
	delete(ds.open, abs)
	if ds.last == abs {
		ds.last = ""
	}
	return open
}

// touch notes that a call is about abs, or wrote it, now.
func (ds *docStore) touch(abs string) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if d, ok := ds.open[abs]; ok {
		ds.tick++
		d.used = ds.tick
	}
}

// ranked notes that a reopen opened abs from its list's place rank (1 is
// the first).
func (ds *docStore) ranked(abs string, rank int) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if d, ok := ds.open[abs]; ok {
		d.rank = rank
	}
}

// recent lists at most n of the open files (all for n < 0): those a call
// was about or wrote, the most recent first, then those a reopen opened,
// in its list's order, then the others (opened to show a rename, to
// probe a load), by path.
func (ds *docStore) recent(n int) []string {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	out := make([]string, 0, len(ds.open))
	for abs := range ds.open {
		out = append(out, abs)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := ds.open[out[i]], ds.open[out[j]]
		switch {
		case a.used != b.used:
			return a.used > b.used
		case (a.rank == 0) != (b.rank == 0):
			return a.rank != 0
		case a.rank != b.rank:
			return a.rank < b.rank
		}
		return out[i] < out[j]
	})
	if n < 0 {
		return out
	}
	return out[:min(n, len(out))]
}

// used says whether a call was about, or wrote, any open document.
func (ds *docStore) used() bool {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	for _, d := range ds.open {
		if d.used > 0 {
			return true
		}
	}
	return false
}

// firstOf is the first n distinct paths of lists, in order.
func firstOf(n int, lists ...[]string) []string {
	var out []string
	seen := map[string]bool{}
	for _, l := range lists {
		for _, p := range l {
			if len(out) == n {
				return out
			}
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	return out
}

// has says whether abs is open.
func (ds *docStore) has(abs string) bool {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	_, open := ds.open[abs]
	return open
}

// paths lists the open files but except.
func (ds *docStore) paths(except string) []string {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	out := make([]string, 0, len(ds.open))
	for abs := range ds.open {
		if abs != except {
			out = append(out, abs)
		}
	}
	return out
}

// version is the version of abs the server was sent, if open.
func (ds *docStore) version(abs string) (int32, bool) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	d, open := ds.open[abs]
	if !open {
		return 0, false
	}
	return d.version, true
}

// text returns the content the server was last sent for a file, if open.
func (ds *docStore) text(abs string) (string, bool) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	d, ok := ds.open[abs]
	if !ok {
		return "", false
	}
	return d.text, true
}

// lines returns an open file's text, as the server was sent it, split
// into lines (split once per version), and whether it is open.
func (ds *docStore) lines(abs string) ([]string, bool) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	d, ok := ds.open[abs]
	if !ok {
		return nil, false
	}
	if d.lines == nil {
		d.lines = strings.Split(d.text, "\n")
	}
	return d.lines, true
}

// lastSynced is the file synced last, "" for none.
func (ds *docStore) lastSynced() string {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	return ds.last
}

// errGone says a file no longer exists: it was deleted, and the server
// was told so.
var errGone = errors.New("the file no longer exists")

// hashOf is the workspace hash of a text.
func hashOf(text string) string { return workspace.Hash([]byte(text)) }
