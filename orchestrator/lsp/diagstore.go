package lsp

import (
	"context"
	"sync"
	"time"

	"go.lsp.dev/protocol"
)

// diagStore holds the newest diagnostics a server published for each
// file, counts the publishes, and wakes whoever waits for one. The
// connection's read goroutine publishes and never blocks here; queries
// wait. Its lock guards the map, the counter and the channel.
type diagStore struct {
	debounce time.Duration   // how long a file stays quiet after a publish before its answer stands
	timeout  time.Duration   // how long a wait lasts at most
	stop     <-chan struct{} // closed when the server exited: waits end

	mu      sync.Mutex
	byPath  map[string]*publish // by absolute host path
	seq     uint64              // counts publishes
	changed chan struct{}       // closed on the next publish; made when someone waits
}

// publish is the newest diagnostics a server published for a file. It is
// replaced, never changed, so it is read without the lock.
type publish struct {
	at      time.Time
	seq     uint64
	version int32 // -1 when the server gave none
	items   []protocol.Diagnostic
	outside bool // the file resolved outside the workdir: never shown
}

// publish records a publish for abs and wakes everyone waiting for one.
func (ds *diagStore) publish(abs string, version int32, items []protocol.Diagnostic, outside bool) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	ds.seq++
	if ds.byPath == nil {
		ds.byPath = map[string]*publish{}
	}
	ds.byPath[abs] = &publish{at: time.Now(), seq: ds.seq, version: version, items: items, outside: outside}
	if ds.changed != nil {
		close(ds.changed)
		ds.changed = nil
	}
}

// count is the publish counter: a document synced when it read n is
// answered only by a publish counted after n.
func (ds *diagStore) count() uint64 {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	return ds.seq
}

// forget drops the diagnostics of a deleted file.
func (ds *diagStore) forget(abs string) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	delete(ds.byPath, abs)
}

// watch returns the newest publish of abs (nil for none) and a channel
// closed on the next publish of any file.
func (ds *diagStore) watch(abs string) (*publish, <-chan struct{}) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.changed == nil {
		ds.changed = make(chan struct{})
	}
	return ds.byPath[abs], ds.changed
}

// wait returns the diagnostics of abs for a document of the given version
// sent when the counter was after: the first publish counted after it for
// that version or a later one (or for none), plus follow-ups until the
// file is quiet for the debounce. ok is false when none came within the
// timeout, ctx ended or the server exited: silence is never taken as clean.
func (ds *diagStore) wait(ctx context.Context, abs string, after uint64, version int32) (items []protocol.Diagnostic, ok bool) {
	deadline := time.NewTimer(ds.timeout)
	defer deadline.Stop()
	var quiet <-chan time.Time
	for {
		p, ch := ds.watch(abs)
		fresh := p != nil && p.seq > after && (p.version < 0 || p.version >= version)
		if fresh && quiet == nil {
			if time.Since(p.at) >= ds.debounce {
				return p.items, true // answered for this version, and quiet since
			}
			quiet = time.After(ds.debounce)
		}
		select {
		case <-ch:
			if quiet != nil {
				quiet = time.After(ds.debounce) // a follow-up publish: keep listening
			}
		case <-quiet:
			return p.items, true
		case <-deadline.C:
			if fresh {
				return p.items, true
			}
			return nil, false
		case <-ctx.Done():
			return nil, false
		case <-ds.stop:
			return nil, false
		}
	}
}

// settle waits until nothing was published for the debounce, up to the
// timeout: after a pulled answer, so the publishes the server makes for
// other files (a broken caller) are heard.
func (ds *diagStore) settle(ctx context.Context) {
	deadline := time.NewTimer(ds.timeout)
	defer deadline.Stop()
	for {
		_, ch := ds.watch("")
		select {
		case <-ch:
		case <-time.After(ds.debounce):
			return
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		case <-ds.stop:
			return
		}
	}
}

// since returns the newest publish of every file published after seq, and
// the publish counter.
func (ds *diagStore) since(seq uint64) (map[string]*publish, uint64) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	out := map[string]*publish{}
	for abs, p := range ds.byPath {
		if p.seq > seq {
			out[abs] = p
		}
	}
	return out, ds.seq
}

// snapshot returns the newest published diagnostics of every file and the
// publish counter.
func (ds *diagStore) snapshot() (map[string][]protocol.Diagnostic, uint64) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	out := make(map[string][]protocol.Diagnostic, len(ds.byPath))
	for abs, p := range ds.byPath {
		out[abs] = p.items
	}
	return out, ds.seq
}

// latest returns the newest published diagnostics of a file.
func (ds *diagStore) latest(abs string) []protocol.Diagnostic {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if p := ds.byPath[abs]; p != nil {
		return p.items
	}
	return nil
}
