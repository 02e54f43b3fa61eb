package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
	"github.com/berth-dev/berth/orchestrator/serve"
)

func serveCmd(args []string, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	file := fs.String("config", "", "configuration file (YAML); every key has a default")
	listen := fs.String("listen", "", "TCP address of the HTTP listener (default rpc.listen, 127.0.0.1:7070); with --stdio or --unix it is only opened when given")
	stdio := fs.Bool("stdio", false, "speak the protocol on stdin/stdout (Content-Length framing); exit when stdin closes")
	unixPath := fs.String("unix", "", "also serve on a unix socket at this path (mode 0600, no token)")
	tokenFile := fs.String("token-file", "", "file holding the bearer token for /v1/rpc (default rpc.token_file, else $BERTH_TOKEN, else generated)")
	pidFile := fs.String("pid-file", "", "write Berth's pid to this file (for orchestrator handoff --pid-file); removed when Berth exits")
	stateDir := fs.String("state-dir", "", "state directory, where kept processes are recorded for a Berth started again on it (default state.dir, else a directory of this Berth's own)")
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
	if *stateDir != "" {
		cfg.State.Dir = *stateDir
	}
	// With stdio or a unix socket, a TCP listener is opened only on request,
	// so a harness starting Berth as a child never collides on a port.
	tcp := cfg.RPC.Listen != "" && (listenSet || (!*stdio && cfg.RPC.Unix == ""))
	if !tcp && !*stdio && cfg.RPC.Unix == "" {
		return errors.New("nothing to serve: rpc.listen is empty; pass --listen ADDR, --stdio or --unix PATH")
	}

	log := newLogger(cfg, stderr)
	d, preg, err := build(cfg, log)
	if err != nil {
		return err
	}
	reg, m := d.Registry, d.Metrics
	runs := orchestrator.NewRuns(m, cfg.Runs.IdleTimeout, enclosures(cfg, log))
	runs.WriteReadOnlyMounts = cfg.Enclosure.WriteReadOnlyMounts
	runs.Resumers = d.Resumers
	runs.Takers = d.Takers
	records, err := keeping(cfg, runs, log)
	if err != nil {
		return err
	}
	srv := &rpc.Server{
		Registry: reg, Runs: runs, Metrics: m, Version: buildVersion(),
		DisconnectGrace: cfg.Runs.DisconnectGrace, MaxMessageSize: cfg.RPC.MaxMessageBytes, Log: log,
	}
	handedOff := false
	if runs.Keeping != nil {
		store := runs.Keeping.Store
		defer func() {
			if handedOff {
				// The kept processes stay with their relays, and their
				// records for the next Berth: release the directory at once.
				_ = store.HandOff()
				return
			}
			runs.Keeping.Close()
		}()
		if how := store.Previous(); how != "" {
			m.Restarted(how)
			log.Info("the Berth before ended: taking back what it left", "how", how)
		}
		calls, bad := store.Calls()
		for _, err := range bad {
			log.Warn(err.Error())
		}
		srv.CallStore, srv.EarlierCalls = store, calls
		// Before serving: a harness that reconnects at once finds its
		// runs' processes pending.
		runs.Reattach(context.Background(), records, cfg.Runs.DisconnectGrace)
	}
	if *pidFile != "" {
		remove, err := writePidFile(*pidFile)
		if err != nil {
			return err
		}
		defer remove()
	}
	runs.OnStart = reg.RunStarted // the providers' background work: lsp's prewarm
	o := serve.Options{
		Server:         srv,
		HandoffTimeout: cfg.Runs.HandoffTimeout,
		Unix:           cfg.RPC.Unix,
		Metrics:        promhttp.HandlerFor(preg, promhttp.HandlerOpts{Registry: preg}),
		ReaperInterval: cfg.Runs.ReaperInterval,
		Log:            log,
		Stderr:         stderr,
	}
	if tcp {
		token, path, err := loadToken(cfg.RPC.TokenFile)
		if err != nil {
			return err
		}
		if path != "" {
			fmt.Fprintf(stderr, "token written to %s (send it as \"Authorization: Bearer <token>\")\n", path)
		}
		o.Listen, o.Token = cfg.RPC.Listen, token
	}
	if *stdio {
		if o.Stdout, err = protocolStdout(); err != nil {
			return err
		}
		o.Stdin = protocolStdin()
	}
	err = serve.Run(context.Background(), o)
	if errors.Is(err, serve.ErrHandedOff) {
		handedOff = true
		return nil
	}
	return err
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
