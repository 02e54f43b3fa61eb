package rpc

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
	"github.com/berth-dev/berth/orchestrator/state"
)

// DefaultDisconnectGrace is how long a closed connection's runs live on
// when the server names no grace.
const DefaultDisconnectGrace = 30 * time.Second

// Server serves the harness protocol on any number of connections.
type Server struct {
	Registry *orchestrator.Registry
	Runs     *orchestrator.Runs
	Metrics  *metrics.Metrics
	// Version is reported by initialize.
	Version string
	// DisconnectGrace is how long the runs of a closed connection live on
	// before they end; zero ends them at once.
	DisconnectGrace time.Duration
	// MaxMessageSize bounds one inbound message; <= 0 means
	// DefaultMaxMessageSize.
	MaxMessageSize int64
	Log            *slog.Logger
	// CallStore keeps tools/call's call ids across a restart (the state
	// directory); nil keeps them in memory only. EarlierCalls are the
	// ones a Berth before this one recorded there. Set both before
	// serving.
	CallStore    CallStore
	EarlierCalls []state.Call

	mu     sync.Mutex
	conns  map[*peer]bool
	timers map[*time.Timer]bool
	closed bool

	callsOnce sync.Once
	calls     *calls

	handoff handoff
}

// journal is the server's call ids.
func (s *Server) journal() *calls {
	s.callsOnce.Do(func() { s.calls = newCalls(s.CallStore, s.log(), s.EarlierCalls) })
	return s.calls
}

// ServeConn serves one connection until it closes, then schedules the end
// of its runs after the disconnect grace. transport labels metrics
// ("stdio", "websocket", "unix").
func (s *Server) ServeConn(f Framer, transport string) { _ = s.serveConn(f, transport) }

// serveConn is ServeConn, returning why the connection's reading ended:
// nil for the end of its stream or Close.
func (s *Server) serveConn(f Framer, transport string) error {
	sess := &session{srv: s}
	p := newPeer(f, s.handoff.guard(sess.handle), peerOptions{limit: s.MaxMessageSize, log: s.log(), onReject: func(reason string) {
		s.Metrics.RPCMessagesRejected.WithLabelValues(reason).Inc()
	}})
	sess.peer = p
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = f.Close()
		return nil
	}
	if s.conns == nil {
		s.conns = map[*peer]bool{}
	}
	s.conns[p] = true
	s.mu.Unlock()

	gauge := s.Metrics.RPCConnectionsActive.WithLabelValues(transport)
	gauge.Inc()
	p.start()
	<-p.Done()
	gauge.Dec()
	err := p.Err()
	switch {
	case errors.Is(err, ErrStreamLost):
		s.log().Error("rpc: closing the connection: its stream is out of step and cannot be recovered", "transport", transport, "err", err)
	case err != nil:
		s.log().Debug("rpc: connection ended", "transport", transport, "err", err)
	}
	s.mu.Lock()
	delete(s.conns, p)
	s.mu.Unlock()
	s.release(sess)
	return err
}

// release ends the session's runs after the grace period.
func (s *Server) release(sess *session) {
	if s.HandingOff() {
		return // the runs stay, for the Berth that takes over
	}
	if s.DisconnectGrace <= 0 {
		s.Runs.EndOwnedBy(sess, orchestrator.EndDisconnect)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if s.timers == nil {
		s.timers = map[*time.Timer]bool{}
	}
	var t *time.Timer
	t = time.AfterFunc(s.DisconnectGrace, func() {
		s.mu.Lock()
		delete(s.timers, t)
		s.mu.Unlock()
		s.Runs.EndOwnedBy(sess, orchestrator.EndDisconnect)
	})
	s.timers[t] = true
}

// Close starts closing every connection (cancelling their handlers)
// without waiting, and cancels pending grace timers; the caller ends the
// runs (Runs.StopAll).
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	conns := make([]*peer, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	for t := range s.timers {
		t.Stop()
	}
	s.timers = nil
	s.mu.Unlock()
	for _, c := range conns {
		c.abort()
	}
}

func (s *Server) log() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}

func (s *Server) maxMessageSize() int64 {
	if s.MaxMessageSize <= 0 {
		return DefaultMaxMessageSize
	}
	return s.MaxMessageSize
}
