package structural

import "sync"

// fileKey says which version of a file a cache entry is about, and as
// which language it was read (a .h file may be searched as c or cpp).
type fileKey struct {
	size  int64
	mtime int64 // nanoseconds
	lang  string
}

// cacheEntry is what the run knows about one version of a file: its
// parse, if it was parsed, and the words it was found to lack, so a
// repeated query skips it without reading it again.
type cacheEntry struct {
	key   fileKey
	tree  *tree
	bom   bool
	lacks map[string]bool
}

// treeCache keeps parsed files for the life of a run, keyed by path,
// size and modification time. Past limit bytes it stops adding trees
// (it keeps what it has): a search of a huge tree still works, only
// without the speed-up for the excess.
type treeCache struct {
	mu      sync.Mutex
	entries map[string]*cacheEntry // by absolute path
	bytes   int64
	limit   int64
}

func newTreeCache(limit int64) *treeCache {
	return &treeCache{entries: map[string]*cacheEntry{}, limit: limit}
}

// get returns the entry for this version of the file, or nil.
func (c *treeCache) get(path string, k fileKey) *cacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[path]
	if e == nil || e.key != k {
		return nil
	}
	return e
}

// putTree records a parse.
func (c *treeCache) putTree(path string, k fileKey, t *tree, bom bool) {
	cost := int64(len(t.src)) + int64(len(t.nodes))*16
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bytes+cost > c.limit {
		return
	}
	c.drop(path)
	c.entries[path] = &cacheEntry{key: k, tree: t, bom: bom}
	c.bytes += cost
}

// putLacks records that this version of the file lacks word.
func (c *treeCache) putLacks(path string, k fileKey, word string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[path]
	if e == nil || e.key != k {
		c.drop(path)
		e = &cacheEntry{key: k}
		c.entries[path] = e
	}
	if e.lacks == nil {
		e.lacks = map[string]bool{}
	}
	e.lacks[word] = true
}

// forget drops what is known about a file (resolve wrote it).
func (c *treeCache) forget(path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drop(path)
}

// clear drops everything (the run ended).
func (c *treeCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries, c.bytes = map[string]*cacheEntry{}, 0
}

func (c *treeCache) drop(path string) {
	if e := c.entries[path]; e != nil {
		if e.tree != nil {
			c.bytes -= int64(len(e.tree.src)) + int64(len(e.tree.nodes))*16
		}
		delete(c.entries, path)
	}
}
