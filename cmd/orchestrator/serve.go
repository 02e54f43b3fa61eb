package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

func serveCmd(args []string, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	file := fs.String("config", "", "configuration file (YAML); every key has a default")
	listen := fs.String("listen", "", "TCP address of the HTTP listener (default rpc.listen, 127.0.0.1:7070); with --stdio or --unix it is only opened when given")
	stdio := fs.Bool("stdio", false, "speak the protocol on stdin/stdout (Content-Length framing); exit when stdin closes")
	unixPath := fs.String("unix", "", "also serve on a unix socket at this path (mode 0600, no token)")
	tokenFile := fs.String("token-file", "", "file holding the bearer token for /v1/rpc (default rpc.token_file, else $BERTH_TOKEN, else generated)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*file)
	if err != nil {
		return err
	}
	listenSet := false
	fs.Visit(func(f *flag.Flag) { listenSet = listenSet || f.Name == "listen" })
	if *listen != "" {
		cfg.RPC.Listen = *listen
	}
	if *unixPath != "" {
		cfg.RPC.Unix = *unixPath
	}
	if *tokenFile != "" {
		cfg.RPC.TokenFile = *tokenFile
	}
	// With stdio or a unix socket, a TCP listener is opened only on request,
	// so a harness starting Berth as a child never collides on a port.
	tcp := cfg.RPC.Listen != "" && (listenSet || (!*stdio && cfg.RPC.Unix == ""))
	if !tcp && !*stdio && cfg.RPC.Unix == "" {
		return errors.New("nothing to serve: rpc.listen is empty; pass --listen ADDR, --stdio or --unix PATH")
	}

	log := newLogger(cfg, stderr)
	reg, m, preg, err := build(cfg, log)
	if err != nil {
		return err
	}
	runs := orchestrator.NewRuns(m, cfg.Runs.IdleTimeout)
	srv := &rpc.Server{
		Registry: reg, Runs: runs, Metrics: m, Version: buildVersion(),
		DisconnectGrace: cfg.Runs.DisconnectGrace, MaxMessageSize: cfg.RPC.MaxMessageBytes, Log: log,
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// A harness that goes away may take our stderr with it: a log line
	// written to it must fail, not kill the process (SIGPIPE) before it
	// has ended its runs. Notify, not Ignore: children keep the default.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	var ready atomic.Bool
	var stdioLost atomic.Pointer[error] // the only connection, stdio, is lost
	ready.Store(true)
	metricsHandler := promhttp.HandlerFor(preg, promhttp.HandlerOpts{Registry: preg})

	var wg sync.WaitGroup
	wg.Go(func() { runs.Reaper(ctx, cfg.Runs.ReaperInterval) })

	var servers []*http.Server
	serveHTTP := func(l net.Listener, h http.Handler) {
		hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, hs)
		wg.Go(func() {
			if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("http server stopped", "addr", l.Addr().String(), "err", err)
				stop()
			}
		})
	}
	if tcp {
		token, path, err := loadToken(cfg.RPC.TokenFile)
		if err != nil {
			return err
		}
		l, err := net.Listen("tcp", cfg.RPC.Listen)
		if err != nil {
			return fmt.Errorf("listen %s: %w (pick another address with --listen)", cfg.RPC.Listen, err)
		}
		if path != "" {
			fmt.Fprintf(stderr, "token written to %s (send it as \"Authorization: Bearer <token>\")\n", path)
		}
		serveHTTP(l, srv.HTTPHandler(rpc.HTTPOptions{Token: token, Transport: "websocket", Metrics: metricsHandler, Ready: ready.Load}))
		fmt.Fprintf(stderr, "listening on http://%s (WebSocket at ws://%s%s)\n", l.Addr(), l.Addr(), rpc.RPCPath)
	}
	if cfg.RPC.Unix != "" {
		l, err := listenUnix(cfg.RPC.Unix)
		if err != nil {
			return err
		}
		defer os.Remove(cfg.RPC.Unix)
		serveHTTP(l, srv.HTTPHandler(rpc.HTTPOptions{Transport: "unix", Metrics: metricsHandler, Ready: ready.Load}))
		fmt.Fprintf(stderr, "listening on unix:%s (WebSocket at %s, no token: the socket is mode 0600)\n", cfg.RPC.Unix, rpc.RPCPath)
	}
	if *stdio {
		out, err := protocolStdout()
		if err != nil {
			return err
		}
		in := protocolStdin()
		wg.Go(func() {
			err := srv.ServeStdio(in, out)
			if errors.Is(err, rpc.ErrStreamLost) {
				// Only this connection is lost: the listeners serve on.
				if tcp || cfg.RPC.Unix != "" {
					return
				}
				stdioLost.Store(&err)
			} else {
				log.Debug("stdin closed: stopping")
			}
			stop()
		})
	}

	<-ctx.Done()
	ready.Store(false)
	log.Info("stopping: ending every run")
	srv.Close()
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, hs := range servers {
		_ = hs.Shutdown(shutdown)
	}
	runs.StopAll()
	if p := stdioLost.Load(); p != nil {
		return fmt.Errorf("stdio: %w", *p)
	}
	if *stdio {
		// A read from stdin cannot be interrupted; the process is exiting.
		return nil
	}
	wg.Wait()
	return nil
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

// protocolStdin returns stdin for the protocol. When it is a pipe or a
// socket (a harness's), it is a private copy in non-blocking mode, so Go
// waits for it in its poller: a blocking read holds an OS thread and its
// scheduler slot, and the handler a request wakes then waits until the
// runtime notices (tens of microseconds to milliseconds on a small
// machine). A terminal is left as it is: non-blocking mode would reach
// the shell that shares it.
func protocolStdin() *os.File {
	var st syscall.Stat_t
	if err := syscall.Fstat(0, &st); err != nil {
		return os.Stdin
	}
	if mode := st.Mode & syscall.S_IFMT; mode != syscall.S_IFIFO && mode != syscall.S_IFSOCK {
		return os.Stdin
	}
	fd, err := syscall.Dup(0)
	if err != nil {
		return os.Stdin
	}
	syscall.CloseOnExec(fd)
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return os.Stdin
	}
	return os.NewFile(uintptr(fd), "protocol-stdin")
}

// protocolStdout keeps a private copy of stdout for the protocol and points
// file descriptor 1 at stderr, so a stray print anywhere in the process
// (or a child that inherits it) lands in the log instead of corrupting a
// message.
func protocolStdout() (*os.File, error) {
	fd, err := syscall.Dup(1)
	if err != nil {
		return nil, fmt.Errorf("stdio: %w", err)
	}
	syscall.CloseOnExec(fd)
	if err := syscall.Dup3(2, 1, 0); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("stdio: %w", err)
	}
	return os.NewFile(uintptr(fd), "protocol-stdout"), nil
}
