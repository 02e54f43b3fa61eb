//go:build linux

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-dev/berth/enclosure/relay/wire"
	"github.com/berth-dev/berth/internal/procfs"
)

// parentGone is the signal the kernel sends the relay when its parent
// dies. It is one nobody else sends, so that a spurious one (a Go parent's
// forking thread exiting while the parent lives) can be told apart and
// ignored.
const parentGone = syscall.SIGUSR2

// runFlags are run's options. signal parses a relay's command line with
// the same flags to find it by tag.
type runFlags struct {
	grace time.Duration
	stdin string
	tag   string
	dir   string // PROG's working directory ("": the relay's)
	// connect is a unix socket to give PROG as its stdin and stdout
	// ("": the relay's stdout, and its stdin as --stdin says).
	connect string
	// tokenStdin: --connect's token is the first line of the relay's
	// stdin, the only place it may come from: an environment or a command
	// line is readable by every process in the container (in
	// /proc/PID/environ and /proc/PID/cmdline) for the relay's whole life.
	tokenStdin bool
	env        []string // KEY=VALUE added to PROG's environment, in order
	// hold is how long the relay keeps PROG when its caller goes away
	// without stopping it (0: it does not), listening on holdSocket for
	// one that comes back.
	hold       time.Duration
	holdSocket string
	// connectFd is an inherited unix socket that takes the place of
	// --connect's (0: none): the host's Berth passes one end of a pair.
	connectFd int
}

func parseRunFlags(args []string) (runFlags, []string, error) {
	var f runFlags
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.DurationVar(&f.grace, "grace", 2*time.Second, "")
	fs.StringVar(&f.stdin, "stdin", wire.StdinRaw, "")
	fs.StringVar(&f.tag, "tag", "", "")
	fs.StringVar(&f.dir, "dir", "", "")
	fs.StringVar(&f.connect, "connect", "", "")
	fs.BoolVar(&f.tokenStdin, "token-stdin", false, "")
	fs.DurationVar(&f.hold, "hold", 0, "")
	fs.StringVar(&f.holdSocket, "hold-socket", "", "")
	fs.IntVar(&f.connectFd, "connect-fd", 0, "")
	fs.Func("env", "", func(kv string) error {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("--env %q is not KEY=VALUE", kv)
		}
		f.env = append(f.env, kv)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return f, nil, err
	}
	if f.stdin != wire.StdinRaw && f.stdin != wire.StdinFramed && f.stdin != wire.StdinInherit {
		return f, nil, errors.New("--stdin is raw, framed or inherit, not " + f.stdin)
	}
	if f.connect != "" && f.stdin == wire.StdinInherit {
		return f, nil, errors.New("--connect gives PROG a socket as its stdin: use --stdin framed or raw for the relay's own, not inherit")
	}
	if f.tokenStdin && f.connect == "" && f.hold == 0 {
		return f, nil, errors.New("--token-stdin is --connect's token: give --connect too")
	}
	if f.hold < 0 {
		return f, nil, errors.New("--hold must not be negative")
	}
	if f.connectFd != 0 && (f.connectFd < 3 || f.hold == 0) {
		return f, nil, errors.New("--connect-fd names an inherited socket (3 or more) that takes --hold's handover: give --hold too")
	}
	if f.connectFd != 0 && f.connect != "" {
		return f, nil, errors.New("--connect-fd takes the place of --connect: give one")
	}
	if f.hold > 0 {
		switch {
		case f.holdSocket == "" || !strings.HasPrefix(f.holdSocket, "/"):
			return f, nil, errors.New("--hold listens on --hold-socket: give an absolute path")
		case f.connect == "" && f.connectFd == 0:
			return f, nil, errors.New("--hold hands PROG's stdio over a unix socket: give --connect or --connect-fd")
		case !f.tokenStdin:
			return f, nil, errors.New("--hold takes its token as the first line of stdin: give --token-stdin")
		case f.stdin != wire.StdinFramed:
			return f, nil, errors.New("--hold reads its caller's signals and end in frames: give --stdin framed")
		}
	} else if f.holdSocket != "" {
		return f, nil, errors.New("--hold-socket is --hold's: give --hold too")
	}
	if f.connect != "" && !f.tokenStdin {
		return f, nil, errors.New("--connect takes its token as the first line of stdin: give --token-stdin (an environment or a command line is readable by every process in the container)")
	}
	if f.grace < 0 {
		return f, nil, errors.New("--grace must not be negative")
	}
	return f, fs.Args(), nil
}

// runner is one run: the relay's child (PROG, the leader of its own
// process group) and everything it starts.
type runner struct {
	flags runFlags
	child int // PROG's pid, which is also its process group id
	in    *childInput
	sock  *os.File // --connect's socket, PROG's stdin and stdout; nil without
	// hold is run --hold's (nil without): the far ends of PROG's stdio,
	// handed over sock.
	hold *holder
	// ctl is the connection of a Berth that came back (nil: none, or the
	// relay's own stdin is the control).
	ctl *net.UnixConn

	leaderDone chan struct{} // closed when PROG has been reaped; code is set
	code       int
	allDone    chan struct{} // closed when the relay has no child left
}

func runMode(args []string) int {
	flags, argv, err := parseRunFlags(args)
	if err != nil {
		return fail("run: %v\n%s", err, usage)
	}
	if len(argv) == 0 {
		return fail("run: no program given\n%s", usage)
	}
	// A session of its own, so that the caller's group signals reach the
	// relay once and PROG only through it. EPERM means the relay already
	// leads a group (started with Setpgid), which serves as well.
	if _, err := unix.Setsid(); err != nil && !errors.Is(err, unix.EPERM) {
		return fail("run: setsid: %v", err)
	}
	// Signals are caught before the parent-death signal is armed, whose
	// default action would end the relay without ending the group.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, parentGone)
	ppid := os.Getppid()
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(parentGone), 0, 0, 0); err != nil {
		return fail("run: prctl(PR_SET_PDEATHSIG): %v", err)
	}
	if os.Getppid() != ppid {
		return fail("run: the parent exited before the relay started %s", argv[0])
	}
	// Orphans of PROG's tree become the relay's children, so none escapes
	// the kill and the relay knows when the last one is gone.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fail("run: prctl(PR_SET_CHILD_SUBREAPER): %v", err)
	}

	r := &runner{flags: flags, leaderDone: make(chan struct{}), allDone: make(chan struct{})}
	var token string
	if flags.tokenStdin {
		if token, err = readToken(os.Stdin); err != nil {
			return fail("run: --token-stdin: %v", err)
		}
	}
	if flags.connect != "" {
		// Before PROG is looked up, so that a relay that could not
		// connect fails with ExitRelayFailed and nothing else has run.
		fd, err := connectStdio(flags.connect, token)
		if err != nil {
			return fail("run: --connect %s: %v", flags.connect, err)
		}
		r.sock = os.NewFile(uintptr(fd), flags.connect)
	}
	if flags.connectFd > 0 {
		unix.CloseOnExec(flags.connectFd)
		r.sock = os.NewFile(uintptr(flags.connectFd), "connect-fd")
	}
	if flags.hold > 0 {
		if token == "" {
			return fail("run: --hold: the token's line on stdin is empty: the caller gives the one a Berth that comes back will say")
		}
		r.hold = &holder{grace: flags.hold, token: token, tag: flags.tag, path: flags.holdSocket}
		r.hold.listen()
	}
	if code := r.start(argv); code != 0 {
		r.hold.stop(false)
		return code
	}
	go r.reap()
	eof := make(chan struct{})
	switch flags.stdin {
	case wire.StdinInherit:
		// PROG holds the stdin; only signals and the parent's death end
		// the run, and eof never closes.
	case wire.StdinFramed:
		// Signals framed on stdin join the caught ones.
		go func() { r.in.copyFramed(os.Stdin, sigs); close(eof) }()
	default:
		go func() { r.in.copyRaw(os.Stdin); close(eof) }()
	}
	return r.loop(sigs, eof, ppid)
}

// forwarded says whether the relay acts on sig, caught or framed: SIGINT
// goes to PROG's group, and the others end it.
func forwarded(sig syscall.Signal) bool {
	switch sig {
	case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT:
		return true
	}
	return false
}

// start starts PROG with the relay's stdout and stderr and a pipe for
// stdin (the relay's own stdin with --stdin inherit), in a process group
// of its own. It returns an exit code when it could not.
func (r *runner) start(argv []string) int {
	// --env and --dir apply to the relay itself before it looks PROG up,
	// as they would to a shell that set them and then ran PROG: a PATH
	// given is the one searched, and a relative PROG is found from dir.
	for _, kv := range r.flags.env {
		k, v, _ := strings.Cut(kv, "=")
		if err := os.Setenv(k, v); err != nil {
			return fail("run: --env %s: %v", k, err)
		}
	}
	if r.flags.dir != "" {
		if err := os.Chdir(r.flags.dir); err != nil {
			if u := errors.Unwrap(err); u != nil {
				err = u // the reason alone: the path is said already
			}
			fail("run: the working directory %s: %v: give a directory that exists where PROG runs (in a container, a path inside it, such as the workdir's mount)", r.flags.dir, err)
			return wire.ExitNotExec
		}
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		code := wire.ExitNotFound
		if errors.Is(err, os.ErrPermission) {
			code = wire.ExitNotExec
		}
		fail("run: %v", err)
		return code
	}
	if r.hold != nil {
		return r.startHeld(path, argv)
	}
	if r.sock != nil {
		// PROG alone holds the socket: its exit is the caller's EOF.
		// What the relay's stdin carries for PROG is dropped.
		defer r.sock.Close()
		return r.forkExec(path, argv, r.sock, r.sock, os.Stderr, &childInput{})
	}
	if r.flags.stdin == wire.StdinInherit {
		if code := r.forkExec(path, argv, os.Stdin, os.Stdout, os.Stderr, &childInput{}); code != 0 {
			return code
		}
		// PROG's stdin is PROG's alone: a caller writing after PROG closed
		// it gets EPIPE, as it would writing to PROG directly.
		releaseStdin()
		return 0
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return fail("run: stdin pipe: %v", err)
	}
	defer pr.Close()
	if code := r.forkExec(path, argv, pr, os.Stdout, os.Stderr, &childInput{f: pw}); code != 0 {
		pw.Close()
		return code
	}
	return 0
}

// startHeld starts PROG with pipes for its stdio and hands their far
// ends over the socket (run --hold): the relay keeps a copy of each, so
// that PROG reads no EOF and writes into no closed pipe when Berth goes
// away. The socket is closed once they are handed over: the relay's
// stdin carries the caller's signals and its end.
func (r *runner) startHeld(path string, argv []string) int {
	defer r.sock.Close()
	prog, far, err := stdioPipes()
	if err != nil {
		return fail("run: stdio pipes: %v", err)
	}
	code := r.forkExec(path, argv, prog[0], prog[1], prog[2], &childInput{f: far[0]})
	for _, f := range prog {
		f.Close()
	}
	if code != 0 {
		for _, f := range far {
			f.Close()
		}
		return code
	}
	r.hold.stdout, r.hold.stderr = far[1], far[2]
	conn, err := connFile(r.sock)
	if err == nil {
		m, files := r.hold.hello(r.child, far[0])
		err = sendHello(conn, m, files)
		conn.Close()
	}
	if err != nil {
		// PROG runs with nobody to read it: end it, as a caller that
		// went away at once.
		fail("run: handing PROG's stdio over: %v", err)
		r.killAll()
	}
	return 0
}

// forkExec starts PROG with stdin, stdout and stderr; in is what the
// relay writes to PROG's stdin (nothing when PROG has the relay's, or a
// socket).
func (r *runner) forkExec(path string, argv []string, stdin, stdout, stderr *os.File, in *childInput) int {
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{stdin.Fd(), stdout.Fd(), stderr.Fd()},
		// PROG dies with the relay even if the relay is SIGKILLed.
		Sys: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		fail("run: start %s: %v", path, err)
		if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.ENOEXEC) {
			return wire.ExitNotExec
		}
		return wire.ExitNotFound
	}
	r.child = pid
	r.in = in
	return 0
}

// releaseStdin points the relay's fd 0 at /dev/null, so it no longer
// holds the read end of the stdin it handed PROG.
func releaseStdin() {
	if null, err := os.Open(os.DevNull); err == nil {
		_ = unix.Dup2(int(null.Fd()), 0)
		null.Close()
	}
}

// reap waits for every child of the relay: PROG, and the orphans of its
// tree that the kernel hands the subreaper. It records PROG's exit code
// and ends when no child is left.
func (r *runner) reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil { // ECHILD: nothing left
			close(r.allDone)
			return
		}
		if pid == r.child {
			r.code = exitCode(ws)
			close(r.leaderDone)
		}
	}
}

func exitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// loop waits for PROG's exit and ends its tree on stdin EOF, a signal
// (caught, or framed on stdin) or the parent's death.
//
// With --hold, the end of the control (the relay's stdin, or the
// connection of a Berth that came back) or the parent's death does not
// end the tree: the relay holds PROG for the hold's grace and takes the
// first connection that says the token as its new control. Only a signal
// (an orderly stop), the grace passing with no Berth, or PROG's exit ends
// it then.
func (r *runner) loop(sigs chan os.Signal, eof <-chan struct{}, ppid int) int {
	var (
		deadline <-chan time.Time
		dying    bool // PROG was signalled; SIGKILL comes at the deadline
		held     <-chan time.Time
		reqs     <-chan *net.UnixConn // a Berth that came back
	)
	holding := func() bool { return r.hold != nil && r.hold.ln != nil && !dying }
	if holding() {
		reqs = r.hold.reqs
	}
	terminate := func(sig syscall.Signal) {
		r.in.Close()
		_ = syscall.Kill(-r.child, sig)
		if !dying {
			dying = true
			deadline = time.After(r.flags.grace)
			held, reqs = nil, nil
			r.hold.stop(false)
		}
	}
	// detach lets the control go: the tree is held for the grace.
	detach := func() {
		eof = nil
		if r.ctl != nil {
			r.ctl.Close()
			r.ctl = nil
		}
		if held == nil {
			held = time.After(r.hold.grace)
		}
	}
	for {
		select {
		case <-r.leaderDone:
			return r.finish()
		case <-deadline:
			if dying {
				r.killAll()
			} else {
				terminate(syscall.SIGTERM)
			}
		case <-eof:
			if holding() {
				detach()
				continue
			}
			// PROG reads EOF too, and has the grace to end by itself.
			eof = nil
			r.in.Close()
			if !dying {
				deadline = time.After(r.flags.grace)
			}
		case <-held:
			r.hold.stop(true)
			terminate(syscall.SIGTERM)
		case conn := <-reqs:
			if eof != nil {
				refuse(conn, "another Berth is attached to this relay")
				continue
			}
			stdin := r.in.dup()
			m, files := r.hold.hello(r.child, stdin)
			err := sendHello(conn, m, files)
			if stdin != nil {
				stdin.Close()
			}
			if err != nil {
				conn.Close()
				continue
			}
			held = nil
			r.ctl = conn
			ended := make(chan struct{})
			eof = ended
			go func() { r.in.copyFramed(conn, sigs); close(ended) }()
		case s := <-sigs:
			switch s {
			case syscall.SIGINT:
				_ = syscall.Kill(-r.child, syscall.SIGINT)
			case parentGone:
				if os.Getppid() == ppid {
					continue
				}
				if holding() {
					if r.ctl == nil && eof != nil {
						detach() // the parent was the caller
					}
					continue
				}
				terminate(syscall.SIGTERM)
			default:
				terminate(s.(syscall.Signal))
			}
		}
	}
}

// finish ends what PROG left behind and returns PROG's exit code once
// the relay has no child left. The kill is repeated until then, since a
// process may fork while it is being killed.
func (r *runner) finish() int {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		r.killAll()
		select {
		case <-r.allDone:
			r.hold.stop(false)
			if r.ctl != nil {
				sendExit(r.ctl, r.code)
				r.ctl.Close()
			}
			return r.code
		case <-tick.C:
		}
	}
}

// killAll kills PROG's group and every descendant of the relay, in PROG's
// group or not (a debugger puts its debuggee in a group of its own).
func (r *runner) killAll() {
	_ = syscall.Kill(-r.child, syscall.SIGKILL)
	for _, pid := range procfs.Descendants(os.Getpid()) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
