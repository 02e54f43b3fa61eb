package lsp

import (
	"sync"
)

// diagKey identifies a diagnostic for "already reported": severity, code
// and message, never the position, so a problem that only moved is not
// new.
type diagKey struct{ severity, code, message string }

// registry is a run's record of the diagnostics each file is known to
// have: how many of each key. It holds a file's newest diagnostics only, so
// a key that disappeared is forgotten and is new again if it comes back.
type registry struct {
	mu    sync.Mutex
	known map[string]map[diagKey]int // by path relative to the workdir
}

func newRegistry() *registry { return &registry{known: map[string]map[diagKey]int{}} }

// record makes ds the file's known diagnostics.
func (r *registry) record(rel string, ds []diag) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.known[rel] = counts(ds)
}

// update returns the diagnostics of ds that are new for the file (beyond
// the known count of their key; baseline stands in when the file has no
// record) and records ds as the file's known diagnostics.
func (r *registry) update(rel string, ds []diag, baseline []diag) (fresh []diag) {
	r.mu.Lock()
	defer r.mu.Unlock()
	known, ok := r.known[rel]
	if !ok {
		known = counts(baseline)
	}
	seen := map[diagKey]int{}
	for _, d := range ds {
		k := d.key()
		seen[k]++
		if seen[k] > known[k] {
			fresh = append(fresh, d)
		}
	}
	r.known[rel] = seen
	return fresh
}

// has says whether the file has a record.
func (r *registry) has(rel string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.known[rel]
	return ok
}

// forget drops a deleted file's record.
func (r *registry) forget(rel string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.known, rel)
}

func counts(ds []diag) map[diagKey]int {
	m := map[diagKey]int{}
	for _, d := range ds {
		m[d.key()]++
	}
	return m
}
