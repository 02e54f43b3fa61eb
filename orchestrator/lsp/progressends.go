package lsp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"go.lsp.dev/jsonrpc2"
)

// progressEnds lets a request Berth gave a work-done token wait for the
// end of that token's progress, and know then how many publishes of
// diagnostics the server had sent before it. The connection hands each
// message to its handler concurrently with the next (protocol.Handlers
// makes every handler asynchronous), so the order in which the handlers
// run is not the order the messages came in. Messages are read in order,
// though: the stream (readOrder) counts the publishes it reads, and reads
// an awaited token's end itself, so a waiter gets the count and can wait
// for the diagnostics store to have applied that many (diagStore.reach).
// Its lock guards the counters and the waiters.
type progressEnds struct {
	mu        sync.Mutex
	n         uint64 // tokens made
	published uint64 // publishes of diagnostics read
	waiting   map[string]chan uint64
}

// tokenPrefix begins every token Berth makes: the stream decodes only
// the progress of tokens that may be Berth's.
const tokenPrefix = "berth-"

// await makes a token for a request's work-done progress and returns
// it with a channel that gets, when its progress ends, the number of
// publishes read before the end. drop must follow.
func (p *progressEnds) await() (token string, ended <-chan uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	token = fmt.Sprintf("%s%d", tokenPrefix, p.n)
	ch := make(chan uint64, 1)
	if p.waiting == nil {
		p.waiting = map[string]chan uint64{}
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

// read notes a message as the stream reads it, before its handler
// runs: a publish is counted, and the end of an awaited token's progress
// hands its waiter the count so far. Others pass untouched.
func (p *progressEnds) read(msg jsonrpc2.Message) {
	n, ok := msg.(*jsonrpc2.Notification)
	if !ok {
		return
	}
	switch n.Method() {
	case "textDocument/publishDiagnostics":
		p.mu.Lock()
		p.published++
		p.mu.Unlock()
	case "$/progress":
		var v struct {
			Token any `json:"token"`
			Value struct {
				Kind string `json:"kind"`
			} `json:"value"`
		}
		params := n.Params()
		if !strings.Contains(string(params), `"`+tokenPrefix) || json.Unmarshal(params, &v) != nil || v.Value.Kind != "end" {
			return
		}
		token, isString := v.Token.(string)
		if !isString {
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if ch, ok := p.waiting[token]; ok {
			ch <- p.published
			delete(p.waiting, token)
		}
	}
}

// readOrder is a connection's stream, each message it reads noted
// (progressEnds.read) before the connection hands it to a handler.
type readOrder struct {
	jsonrpc2.Stream
	ends *progressEnds
}

func (r readOrder) Read(ctx context.Context) (jsonrpc2.Message, int64, error) {
	msg, n, err := r.Stream.Read(ctx)
	if err == nil {
		r.ends.read(msg)
	}
	return msg, n, err
}
