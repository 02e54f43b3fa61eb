package enclosuretest

import (
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
)

// Proxy passes connections to an engine until Silence: then it still
// accepts, and holds every connection open, old and new, but answers
// nothing, as an engine that hangs does. It closes when the test ends.
type Proxy struct {
	ln              net.Listener
	network, target string

	mu     sync.Mutex
	silent bool
	conns  []net.Conn // Berth's side
	up     []net.Conn // the engine's side
	wg     sync.WaitGroup
}

// NewProxy listens on network ("unix": a socket in the test's directory;
// "tcp": a loopback port) and passes each connection to address.
func NewProxy(t testing.TB, network, address string) *Proxy {
	t.Helper()
	at := "127.0.0.1:0"
	if network == "unix" {
		at = filepath.Join(t.TempDir(), "engine.sock")
	}
	ln, err := net.Listen(network, at)
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, network: network, target: address}
	p.wg.Go(p.serve)
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's address on its network (a socket's path, or
// host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns = append(p.conns, c)
		silent := p.silent
		p.mu.Unlock()
		if silent {
			p.wg.Go(func() { _, _ = io.Copy(io.Discard, c) })
			continue
		}
		e, err := net.Dial(p.network, p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.up = append(p.up, e)
		p.mu.Unlock()
		p.wg.Go(func() {
			_, _ = io.Copy(e, c)
			_ = e.Close()
			_, _ = io.Copy(io.Discard, c) // silenced: read on, answer nothing
		})
		p.wg.Go(func() {
			_, _ = io.Copy(c, e)
			p.mu.Lock()
			silent := p.silent
			p.mu.Unlock()
			if !silent {
				c.Close()
			}
		})
	}
}

// Silence makes the engine hang: its side of every connection is cut,
// Berth's is held open with no answer, and new ones are accepted and
// never answered.
func (p *Proxy) Silence() {
	p.mu.Lock()
	p.silent = true
	up := p.up
	p.up = nil
	p.mu.Unlock()
	for _, e := range up {
		e.Close()
	}
}

func (p *Proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.silent = true
	for _, c := range append(p.conns, p.up...) {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
