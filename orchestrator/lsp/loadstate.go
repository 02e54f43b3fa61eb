package lsp

import (
	"context"
	"strings"
	"sync"
	"time"
)

// loadState is whether a server has loaded its project, as its entry's
// ready signal tells: at once, when its work-done progress ends, or when
// a log line comes. The client callbacks feed it (progressed, logged);
// queries wait on it. A server whose quirks probe for the load (tsserver)
// marks it loaded itself.
type loadState struct {
	signal readiness     // how the server says it has loaded the project
	grace  time.Duration // lsp.progress_grace
	loaded chan struct{} // closed when the project is loaded
	once   sync.Once

	mu          sync.Mutex        // guards what follows
	active      map[string]string // progress tokens begun and not ended, with their titles
	sawProgress bool
}

func newLoadState(signal readiness, grace time.Duration) *loadState {
	return &loadState{signal: signal, grace: grace, loaded: make(chan struct{}), active: map[string]string{}}
}

// initialized starts the wait once the server is initialized: a server
// with no project to load (or that knows only its open files) is loaded
// now; one that reports progress is taken as loaded when it reports none
// within the grace, else when all its progress has ended.
func (l *loadState) initialized() {
	switch l.signal.kind {
	case readyNone, readyOpenFiles:
		l.markLoaded()
	case readyProgress:
		time.AfterFunc(l.grace, func() {
			l.mu.Lock()
			quiet := !l.sawProgress
			l.mu.Unlock()
			if quiet {
				l.markLoaded()
			}
		})
	}
}

// progressed records a progress token's begin (with its title) or end.
// The project is loaded, for "progress", when all begun tokens have
// ended; for "progress:TITLE", when the token begun with that title has.
func (l *loadState) progressed(token, kind, title string) {
	l.mu.Lock()
	var done bool
	switch kind {
	case "begin":
		l.sawProgress = true
		l.active[token] = title
	case "end":
		began, ok := l.active[token]
		delete(l.active, token)
		done = ok && l.signal.kind == readyTitle && strings.HasPrefix(began, l.signal.title)
	}
	if l.signal.kind == readyProgress {
		done = l.sawProgress && len(l.active) == 0
	}
	l.mu.Unlock()
	if done {
		l.markLoaded()
	}
}

// logged marks the project loaded when the line the entry's "log:" waits
// for comes.
func (l *loadState) logged(line string) {
	if l.signal.kind == readyLog && l.signal.log.MatchString(line) {
		l.markLoaded()
	}
}

func (l *loadState) markLoaded() { l.once.Do(func() { close(l.loaded) }) }

// isLoaded says whether the project is loaded, without waiting.
func (l *loadState) isLoaded() bool { return done(l.loaded) }

// wait waits until the project is loaded, ctx ends or the server exits
// (exited closes), and says whether it is loaded.
func (l *loadState) wait(ctx context.Context, exited <-chan struct{}) bool {
	select {
	case <-l.loaded:
		return true
	case <-ctx.Done():
	case <-exited:
	}
	return false
}
