// Package serve runs Berth's server for as long as it lives: it opens the
// listeners (a TCP one with a bearer token, a unix socket only its user
// may open, stdio), runs the reaper, stops on a signal or when the
// context ends, and drains: no new work, every connection closed, every
// run ended. SIGUSR2 is a handoff instead: no new work, the calls in
// flight answered within a bound, every connection closed, and no run
// ended, so that a new Berth on the same state directory takes their
// kept processes back from their relays. cmd/orchestrator parses flags and wires; the lifecycle is
// here, where tests drive it.
package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/berth-dev/berth/orchestrator/rpc"
)

// Options say what to serve. At least one of Listen, Unix and Stdin must
// be set.
type Options struct {
	// Server serves every connection; its runs end when serving stops.
	Server *rpc.Server
	// Listen is the TCP address of the HTTP listener: the WebSocket
	// transport at rpc.RPCPath, which needs Token, and /metrics, /healthz
	// and /readyz. Empty: no TCP listener.
	Listen string
	Token  string
	// Unix is the path of a unix socket serving the same without a
	// token: it is created mode 0600 and removed when serving stops.
	Unix string
	// Stdin and Stdout, when Stdin is set, carry one connection; when it
	// ends, serving stops. Reading Stdin is not waited for at the end: a
	// read from a terminal cannot be interrupted.
	Stdin  io.Reader
	Stdout io.Writer
	// Metrics serves /metrics on the listeners (nil: not served).
	Metrics http.Handler
	// ReaperInterval is how often runs idle for too long are ended
	// (<= 0: DefaultReaperInterval).
	ReaperInterval time.Duration
	Log            *slog.Logger
	// Stderr hears where Berth listens (nil: nobody).
	Stderr io.Writer
	// HandoffTimeout bounds how long a handoff (SIGUSR2) waits for the
	// calls in flight before it cuts them off (<= 0:
	// DefaultHandoffTimeout).
	HandoffTimeout time.Duration
	// Handoff, when set, starts a handoff when it is closed or receives,
	// as SIGUSR2 does (for tests).
	Handoff <-chan struct{}
}

// DefaultHandoffTimeout is runs.handoff_timeout's default.
const DefaultHandoffTimeout = 10 * time.Second

// ErrHandedOff is Run's error after a handoff: Berth stopped taking work
// and answered or cut off its calls, and ended no run. The caller
// releases the state directory (state.Store.HandOff) and exits without
// ending anything, leaving the kept processes to their relays.
var ErrHandedOff = errors.New("handed off: the runs' kept processes are left to their relays for a new Berth on the same state directory")

// DefaultReaperInterval is how often idle runs are looked for when
// Options name no interval.
const DefaultReaperInterval = time.Minute

// drainTimeout bounds how long open HTTP connections get to finish when
// serving stops.
const drainTimeout = 5 * time.Second

// Run serves until ctx ends, SIGINT or SIGTERM arrives, a listener fails,
// or the stdio connection ends; then it drains and returns. It returns an
// error wrapping rpc.ErrStreamLost when the stdio stream fell out of step
// beyond recovery and nothing else was served (the listeners serve on
// without it).
func Run(ctx context.Context, o Options) error {
	if o.Listen == "" && o.Unix == "" && o.Stdin == nil {
		return errors.New("serve: nothing to serve: set Listen, Unix or Stdin")
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	if o.ReaperInterval <= 0 {
		o.ReaperInterval = DefaultReaperInterval
	}
	if o.HandoffTimeout <= 0 {
		o.HandoffTimeout = DefaultHandoffTimeout
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	usr2 := make(chan os.Signal, 1)
	signal.Notify(usr2, syscall.SIGUSR2)
	defer signal.Stop(usr2)
	// A harness that goes away may take our stderr with it: a log line
	// written to it must fail, not kill the process (SIGPIPE) before it
	// has ended its runs. Notify, not Ignore: children keep the default.
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	defer signal.Stop(pipe)

	s := &server{o: o, stop: stop}
	s.ready.Store(true)
	s.wg.Go(func() { o.Server.Runs.Reaper(ctx, o.ReaperInterval) })
	err := s.listen()
	if err == nil {
		select {
		case <-ctx.Done():
		case <-usr2:
			return s.handOff()
		case <-o.Handoff:
			return s.handOff()
		}
	}
	s.drain()
	if err != nil {
		return err
	}
	if p := s.stdioLost.Load(); p != nil {
		return fmt.Errorf("stdio: %w", *p)
	}
	return nil
}

// server is one Run's state.
type server struct {
	o    Options
	stop context.CancelFunc // stops serving

	ready     atomic.Bool
	stdioLost atomic.Pointer[error] // the only connection, stdio, is lost
	servers   []*http.Server
	unix      bool           // the unix socket is ours to remove
	wg        sync.WaitGroup // the reaper and the HTTP servers
}

// listen opens every listener asked for, and stdio.
func (s *server) listen() error {
	o := s.o
	if o.Listen != "" {
		l, err := net.Listen("tcp", o.Listen)
		if err != nil {
			return fmt.Errorf("listen %s: %w (pick another address with --listen)", o.Listen, err)
		}
		s.serveHTTP(l, rpc.HTTPOptions{Token: o.Token, Transport: "websocket"})
		fmt.Fprintf(o.Stderr, "listening on http://%s (WebSocket at ws://%s%s)\n", l.Addr(), l.Addr(), rpc.RPCPath)
	}
	if o.Unix != "" {
		l, err := listenUnix(o.Unix)
		if err != nil {
			return err
		}
		s.unix = true
		s.serveHTTP(l, rpc.HTTPOptions{Transport: "unix"})
		fmt.Fprintf(o.Stderr, "listening on unix:%s (WebSocket at %s, no token: the socket is mode 0600)\n", o.Unix, rpc.RPCPath)
	}
	if o.Stdin != nil {
		// Not in wg: see Options.Stdin.
		go func() {
			err := o.Server.ServeStdio(o.Stdin, o.Stdout)
			if errors.Is(err, rpc.ErrStreamLost) {
				// Only this connection is lost: the listeners serve on.
				if o.Listen != "" || o.Unix != "" {
					return
				}
				s.stdioLost.Store(&err)
			} else {
				o.Log.Debug("stdin closed: stopping")
			}
			s.stop()
		}()
	}
	return nil
}

func (s *server) serveHTTP(l net.Listener, ho rpc.HTTPOptions) {
	ho.Metrics, ho.Ready = s.o.Metrics, s.ready.Load
	hs := &http.Server{Handler: s.o.Server.HTTPHandler(ho), ReadHeaderTimeout: 10 * time.Second}
	s.servers = append(s.servers, hs)
	s.wg.Go(func() {
		if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.o.Log.Error("http server stopped", "addr", l.Addr().String(), "err", err)
			s.stop()
		}
	})
}

// drain stops taking work, closes every connection, ends every run, ends
// what the providers keep beyond runs (Registry.Shutdown) and waits for
// the listeners and the reaper.
func (s *server) drain() {
	s.stop()
	s.ready.Store(false)
	s.o.Log.Info("stopping: ending every run")
	s.o.Server.Close()
	shutdown, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	for _, hs := range s.servers {
		_ = hs.Shutdown(shutdown)
	}
	s.o.Server.Runs.StopAll()
	s.o.Server.Registry.Shutdown() // what providers keep beyond runs: parked language servers
	s.wg.Wait()
	if s.unix {
		_ = os.Remove(s.o.Unix)
	}
}

// handOff stops taking work, answers the calls in flight within the
// bound or cuts them off, closes every connection and returns
// ErrHandedOff, ending no run: their kept processes are left to their
// relays, and the others end with Berth, as a kill -9 leaves them.
func (s *server) handOff() error {
	s.ready.Store(false)
	start := time.Now()
	s.o.Log.Info("handing off: taking no new work, waiting for the calls in flight", "bound", s.o.HandoffTimeout)
	cut := s.o.Server.HandOff(s.o.HandoffTimeout)
	s.stop()
	s.o.Server.Close()
	shutdown, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	for _, hs := range s.servers {
		_ = hs.Shutdown(shutdown)
	}
	s.wg.Wait()
	if s.unix {
		_ = os.Remove(s.o.Unix)
	}
	s.o.Log.Info("handed off: exiting without ending the runs; a Berth started on the same state directory takes their kept processes back", "took", time.Since(start).Round(time.Millisecond), "calls_cut_off", cut)
	return ErrHandedOff
}

// listenUnix listens on a unix socket only its user may open. A stale
// socket file (nobody listening) is replaced; anything else is an error.
func listenUnix(path string) (net.Listener, error) {
	if st, err := os.Lstat(path); err == nil {
		if st.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("unix socket %s: a file that is not a socket is in the way: move it, or pick another path with --unix", path)
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("unix socket %s: another server is listening on it: stop that one, or pick another path with --unix", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("unix socket %s: removing the stale socket: %w", path, err)
		}
	}
	// The socket is created with the process umask; tighten it before
	// anyone can connect by creating it under a restrictive umask.
	old := syscall.Umask(0o177)
	l, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen unix %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}
