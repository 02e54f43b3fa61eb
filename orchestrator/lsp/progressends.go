package lsp

import (
	"fmt"
	"sync"
)

// progressEnds lets a request Berth gave a work-done token wait for the
// end of that token's progress. The connection hands the server's
// messages to their handlers in the order they came, each after the one
// before has returned; so when an end is handled, every notification
// the server sent before it (a publish of diagnostics) has been
// recorded. Its lock guards the waiters and the counter.
type progressEnds struct {
	mu      sync.Mutex
	n       uint64
	waiting map[string]chan struct{}
}

// await makes a token for a request's work-done progress and returns
// it with a channel closed when its progress ends. drop must follow.
func (p *progressEnds) await() (token string, ended <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	token = fmt.Sprintf("berth-%d", p.n)
	ch := make(chan struct{})
	if p.waiting == nil {
		p.waiting = map[string]chan struct{}{}
	}
	p.waiting[token] = ch
	return token, ch
}

// drop forgets a token await made, ended or not.
func (p *progressEnds) drop(token string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.waiting, token)
}

// ended wakes whoever waits for token; a token no one awaits (the
// server's own) is ignored.
func (p *progressEnds) ended(token string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ch, ok := p.waiting[token]; ok {
		close(ch)
		delete(p.waiting, token)
	}
}
