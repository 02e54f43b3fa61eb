package structural

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// stagedFile is one file of a staged change: the hash of the content it
// was computed from, and the new content.
type stagedFile struct {
	path, rel string
	expected  string
	content   []byte
}

// stagedEdit is an ast_edit result waiting for resolve.
type stagedEdit struct {
	id           string
	files        []stagedFile
	replacements int
}

// runState is what the structural tools keep per run: the tree cache and
// the staged edits. Both vanish with the run: it is a run value, and the
// run's end calls Close.
type runState struct {
	cache *treeCache

	mu       sync.Mutex
	next     int
	edits    map[string]*stagedEdit
	resolved map[string]string // edit id → how it was resolved
	// prefix starts the run's edit ids: "edit_" in a new run; in a run
	// resumed after Berth restarted, one with a random tag too, so that
	// no id staged before the restart (lost with that Berth) names a
	// change staged after it.
	prefix string
	// resumed: the run was resumed after Berth restarted.
	resumed bool
}

type stateKey struct{}

func stateOf(run *orchestrator.Run, cacheLimit int64) *runState {
	return run.Value(stateKey{}, func() any {
		s := &runState{cache: newTreeCache(cacheLimit), edits: map[string]*stagedEdit{}, resolved: map[string]string{}, prefix: "edit_"}
		if run.Resumed {
			var b [2]byte
			_, _ = rand.Read(b[:])
			s.prefix, s.resumed = "edit_"+hex.EncodeToString(b[:])+"_", true
		}
		return s
	}).(*runState)
}

// Close drops the staged edits and the cached trees when the run ends,
// so neither outlives it even while something still holds the run.
func (s *runState) Close() {
	s.mu.Lock()
	s.edits = map[string]*stagedEdit{}
	s.mu.Unlock()
	s.cache.clear()
}

// stage records a change and names it.
func (s *runState) stage(files []stagedFile, replacements int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	id := fmt.Sprintf("%s%d", s.prefix, s.next)
	s.edits[id] = &stagedEdit{id: id, files: files, replacements: replacements}
	return id
}

// take removes a staged edit so only one resolve works on it; the error
// says why there is none.
func (s *runState) take(id string) (*stagedEdit, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.edits[id]; ok {
		delete(s.edits, id)
		return e, nil
	}
	if how, ok := s.resolved[id]; ok {
		return nil, fmt.Errorf("edit_id %q was already resolved (%s): call ast_edit again to stage a new change", id, how)
	}
	var open []string
	for k := range s.edits {
		open = append(open, k)
	}
	sort.Strings(open)
	if s.resumed && !strings.HasPrefix(id, s.prefix) {
		// Issue 29 item 3: staged changes are held in memory alone.
		msg := fmt.Sprintf("edit_id %q is not staged: Berth restarted since it was staged, and the changes staged before a restart are lost with it; call ast_edit again to stage the change anew", id)
		if len(open) > 0 {
			msg += "; the changes staged since the restart are " + strings.Join(open, ", ")
		}
		return nil, errors.New(msg)
	}
	if len(open) == 0 {
		return nil, fmt.Errorf("unknown edit_id %q: this run has no staged change; call ast_edit first", id)
	}
	return nil, fmt.Errorf("unknown edit_id %q: the staged changes of this run are %s", id, strings.Join(open, ", "))
}

// done records how an edit was resolved; putBack returns it unresolved.
func (s *runState) done(id, how string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resolved[id] = how
}

func (s *runState) putBack(e *stagedEdit) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.edits[e.id] = e
}

// changes are the writer's view of a staged edit.
func (e *stagedEdit) changes() []workspace.Change {
	var cs []workspace.Change
	for _, f := range e.files {
		cs = append(cs, workspace.Change{Path: f.path, Expected: f.expected, Content: f.content})
	}
	return cs
}
