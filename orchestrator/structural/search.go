package structural

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/berth-dev/berth/orchestrator/workspace"
)

var bom = []byte{0xEF, 0xBB, 0xBF}

// fileParseTimeout bounds the parse of one file, so a grammar that loops
// on some input costs that file, not the search.
const fileParseTimeout = 30 * time.Second

// fileMatches is one file's matches.
type fileMatches struct {
	path    string // absolute
	rel     string
	t       *tree
	bom     bool
	matches []match
}

// content is the file's bytes as read: the byte-order mark and source.
func (f *fileMatches) content() []byte {
	if !f.bom {
		return f.t.src
	}
	return append(append([]byte(nil), bom...), f.t.src...)
}

// skippedFile is a file not searched, and why.
type skippedFile struct {
	rel, why string
}

// searchResult is the outcome of one search: files with matches, sorted
// by path, and the files skipped.
type searchResult struct {
	files   []*fileMatches
	skipped []skippedFile
	total   int // matches
	// none, for a folder holding no file of the language, says what it
	// holds instead; "" otherwise.
	none string
}

// searcher runs one pattern over files.
type searcher struct {
	l        *language
	p        *pattern
	cache    *treeCache
	maxBytes int64
	workers  int
	// root reads every file and folder; langs names what a folder holds
	// when it has no file of l.
	root  *workspace.Root
	langs *languages
	// pf is the pattern's token-run filter, nil where the language has
	// none; run sets it.
	pf *prefilter
}

// run searches the file at start, or every file of the language under it.
func (s *searcher) run(ctx context.Context, start string, isDir bool) (*searchResult, error) {
	s.pf = newPrefilter(s.l.name, s.p)
	paths := make(chan string, 256)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The walker alone writes walkErr and dirSkipped; closing paths
	// publishes them to the workers, and wg.Wait to this function.
	var (
		walkErr    error
		dirSkipped []skippedFile
	)
	w := &walker{root: s.root, l: s.l, out: paths, skipped: func(dir string, err error) {
		dirSkipped = append(dirSkipped, skippedFile{s.root.Rel(dir) + "/", "unreadable folder: " + err.Error()})
	}}
	go func() {
		defer close(paths)
		if !isDir {
			paths <- start
			return
		}
		walkErr = w.walk(ctx, start)
	}()

	workers := s.workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var (
		mu  sync.Mutex
		res = &searchResult{}
		wg  sync.WaitGroup
		err error
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			parser, perr := newParser(s.l.lang)
			if perr != nil {
				mu.Lock()
				err = perr
				mu.Unlock()
				cancel()
				for range paths {
				}
				return
			}
			defer parser.close()
			for path := range paths {
				fm, skip, ferr := s.file(ctx, parser, path)
				mu.Lock()
				switch {
				case ferr != nil:
					if err == nil {
						err = ferr
					}
					cancel()
				case skip != "":
					res.skipped = append(res.skipped, skippedFile{s.root.Rel(path), skip})
				case fm != nil && len(fm.matches) > 0:
					res.files = append(res.files, fm)
					res.total += len(fm.matches)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err == nil {
		err = walkErr
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	res.skipped = append(res.skipped, dirSkipped...)
	if isDir && w.own == 0 && s.langs != nil {
		res.none = w.found(s.langs)
	}
	sort.Slice(res.files, func(i, j int) bool { return res.files[i].rel < res.files[j].rel })
	sort.Slice(res.skipped, func(i, j int) bool { return res.skipped[i].rel < res.skipped[j].rel })
	return res, nil
}

// file searches one file: from the cache when this version was seen
// before, else read, pre-filtered on the pattern's words and then its
// token runs, parsed.
// A non-empty skip says why the file was not searched.
func (s *searcher) file(ctx context.Context, parser *parser, path string) (fm *fileMatches, skip string, err error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	st, err := s.root.Stat(path)
	if err != nil {
		return nil, "unreadable: " + err.Error(), nil
	}
	if !st.Mode().IsRegular() {
		return nil, "not a regular file", nil
	}
	k := fileKey{size: st.Size(), mtime: st.ModTime().UnixNano(), lang: s.l.name}
	if e := s.cache.get(path, k); e != nil {
		if e.tree != nil {
			if lacksWord(e.tree.src, s.p.tokens) != "" {
				return nil, "", nil
			}
			return s.matchTree(path, e.tree, e.bom), "", nil
		}
		for _, w := range s.p.tokens {
			if e.lacks[w.key()] {
				return nil, "", nil
			}
		}
		if s.pf != nil && e.lacks[s.pf.key] {
			return nil, "", nil
		}
	}
	if st.Size() > s.maxBytes {
		return nil, fmt.Sprintf("%s, over the %s limit", humanBytes(st.Size()), humanBytes(s.maxBytes)), nil
	}
	// Read through the root, and key the cache on what the open handle
	// says: the file may have changed, or been swapped, since the stat.
	src, st, err := s.root.ReadRegular(path, s.maxBytes)
	switch {
	case errors.Is(err, workspace.ErrTooLarge):
		return nil, fmt.Sprintf("%s, over the %s limit", humanBytes(st.Size()), humanBytes(s.maxBytes)), nil
	case errors.Is(err, workspace.ErrNotRegular):
		return nil, "not a regular file", nil
	case err != nil:
		return nil, "unreadable: " + err.Error(), nil
	}
	k = fileKey{size: st.Size(), mtime: st.ModTime().UnixNano(), lang: s.l.name}
	hasBOM := bytes.HasPrefix(src, bom)
	if hasBOM {
		src = src[len(bom):]
	}
	if bytes.IndexByte(src[:min(len(src), 8000)], 0) >= 0 {
		return nil, "binary", nil
	}
	if w := lacksWord(src, s.p.tokens); w != "" {
		s.cache.putLacks(path, k, w)
		return nil, "", nil
	}
	if s.pf != nil && !s.pf.admits(src) {
		s.cache.putLacks(path, k, s.pf.key)
		return nil, "", nil
	}
	pctx, cancel := context.WithTimeout(ctx, fileParseTimeout)
	t, err := parser.parse(pctx, src)
	cancel()
	if err != nil && ctx.Err() == nil {
		return nil, fmt.Sprintf("the parser gave up after %s", fileParseTimeout), nil
	}
	if err != nil {
		return nil, "", err
	}
	s.cache.putTree(path, k, t, hasBOM)
	return s.matchTree(path, t, hasBOM), "", nil
}

func (s *searcher) matchTree(path string, t *tree, hasBOM bool) *fileMatches {
	ms := find(s.p, t)
	if len(ms) == 0 {
		return nil
	}
	return &fileMatches{path: path, rel: s.root.Rel(path), t: t, bom: hasBOM, matches: ms}
}

// lacksWord returns the key of the first token src does not contain, or
// "".
func lacksWord(src []byte, tokens []token) string {
	for _, w := range tokens {
		if !w.in(src) {
			return w.key()
		}
	}
	return ""
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
