package lsp

import (
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// fileCache keeps, per server, what rendering locations reads again and
// again: files' lines, and the files the last long list read (recheck).
// Its lock guards both.
type fileCache struct {
	mu     sync.Mutex
	files  map[string]cachedFile
	recent []string
}

// cachedFile is a file's lines as read at a size and modification time.
type cachedFile struct {
	size    int64
	mod     time.Time
	lines   []string
	checked time.Time // when size and time were last found unchanged
}

// maxCachedFiles bounds the line cache of one server.
const maxCachedFiles = 500

// maxRecent bounds the files recheck looks at.
const maxRecent = 64

// fileLines returns a file's lines, read (with read) again only when its
// size or modification time changed: a list of references reads the same
// files call after call. A file checked at or after since is not checked
// again.
func (cache *fileCache) fileLines(abs string, since time.Time, read func(string) ([]byte, error)) []string {
	cache.mu.Lock()
	c, ok := cache.files[abs]
	cache.mu.Unlock()
	if ok && !since.IsZero() && !c.checked.Before(since) {
		return c.lines
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil
	}
	if ok && c.size == st.Size() && c.mod.Equal(st.ModTime()) {
		return c.lines
	}
	b, err := read(abs)
	if err != nil {
		return nil
	}
	c = cachedFile{size: st.Size(), mod: st.ModTime(), lines: strings.Split(string(b), "\n")}
	cache.mu.Lock()
	if cache.files == nil || len(cache.files) >= maxCachedFiles {
		cache.files = map[string]cachedFile{}
	}
	cache.files[abs] = c
	cache.mu.Unlock()
	return c.lines
}

// recheck checks on disk, at or after since, the cached files the last
// long list showed, while the server works on the next query: the list
// it answers then needs no look at the disk for them (a stat each, slow
// when cold). A file found changed leaves the cache, to be read again.
func (cache *fileCache) recheck(since time.Time) {
	cache.mu.Lock()
	recent := slices.Clone(cache.recent)
	cache.mu.Unlock()
	for _, abs := range recent {
		st, err := os.Stat(abs)
		cache.mu.Lock()
		c, ok := cache.files[abs]
		switch {
		case !ok:
		case err == nil && c.size == st.Size() && c.mod.Equal(st.ModTime()):
			c.checked = since
			cache.files[abs] = c
		default:
			delete(cache.files, abs)
		}
		cache.mu.Unlock()
	}
}

// setRecent notes the files a long list read from disk, for the next
// recheck.
func (cache *fileCache) setRecent(recent []string) {
	cache.mu.Lock()
	cache.recent = recent
	cache.mu.Unlock()
}

// offerRecent notes recent for the next recheck unless a list already
// noted its files (or an earlier offer did).
func (cache *fileCache) offerRecent(recent []string) {
	cache.mu.Lock()
	defer cache.mu.Unlock()
	if len(cache.recent) == 0 {
		cache.recent = recent
	}
}

// hasRecent says whether files are noted for the next recheck.
func (cache *fileCache) hasRecent() bool {
	cache.mu.Lock()
	defer cache.mu.Unlock()
	return len(cache.recent) > 0
}
