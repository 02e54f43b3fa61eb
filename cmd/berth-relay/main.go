//go:build linux

// Command berth-relay is the small static helper Berth runs inside an
// enclosure (a container, or the host) so that nothing a run starts can
// outlive it, and so that Berth can reach a container's loopback ports.
// It is built with CGO_ENABLED=0 and needs nothing from the enclosure but
// a Linux kernel: no shell, no libc, no network.
//
// Modes:
//
//	berth-relay run [--grace D] [--stdin raw|framed|inherit] [--tag T] [--dir D] [--env K=V]... [--connect SOCKET | --connect-fd N] [--hold D --hold-socket PATH] [--token-stdin] -- PROG ARGS...
//	berth-relay take --hold-socket PATH --connect SOCKET --token-stdin
//	berth-relay signal PGID|tag=T SIGNAL
//	berth-relay mem tag=T
//	berth-relay dial [--ready] [127.0.0.1:]PORT
//	berth-relay which NAME
//	berth-relay version
//
// run starts PROG in a process group of its own, the relay itself in a
// session of its own, and ends the whole tree when told:
//
//   - SIGTERM, SIGHUP or SIGQUIT to the relay is forwarded to the group,
//     which then has the grace (default 2s) before SIGKILL; SIGINT is only
//     forwarded (it interrupts a kernel, which lives on);
//   - stdin EOF closes PROG's stdin; if PROG has not ended within the
//     grace, it gets SIGTERM, and SIGKILL after another grace. The Engine
//     API cannot kill an exec'd process, and a dropped connection reaches
//     the relay only as EOF;
//   - the death of the relay's parent ends it too (PR_SET_PDEATHSIG, and
//     a check of the parent pid, since a Go parent's forking thread may
//     exit while the parent lives);
//   - when PROG exits, whatever it left behind is killed at once, in its
//     group or not: the relay is a child subreaper, so orphans become its
//     children and it exits only when none is left.
//
// The relay exits with PROG's exit code (128+N when a signal N ended it),
// 127 when PROG is not found, 126 when it cannot be executed, and 125 when
// the relay itself failed (bad usage included).
//
// stdin EOF kills, yet some programs (a vibe worker reading its
// assignment) must see EOF and go on running. --stdin framed serves both:
// the relay's stdin carries frames of a 4-byte big-endian length and that
// many bytes for PROG; an empty frame closes PROG's stdin; a header with
// its top bit set carries a signal in its low byte instead (SIGINT,
// SIGTERM, SIGHUP or SIGQUIT, acted on as if the relay had caught it, so
// a caller needs no second exec to signal); EOF of the relay's stdin
// still ends the group. With the default, --stdin raw, the
// bytes are passed through as they are. --stdin inherit hands PROG the
// relay's stdin itself, with no copy between them (a request then reaches
// PROG with one pipe hop, not two); only signals and the parent's death
// end the run, so it serves a caller that can signal the relay, on the
// same machine.
//
// --tag T names the run so that "signal tag=T" can find the relay without
// knowing its pid (a container's pids are not the engine's), and "mem
// tag=T" too: it prints the resident memory, in bytes, of everything that
// relay runs (its program and what that started), read in /proc.
//
// --dir D and --env K=V (repeated) give PROG a working directory and
// variables, for an exec API that takes neither (Kubernetes'): no shell
// is needed to set them. A missing directory ends the relay with 126 and
// the reason on stderr.
//
// --connect SOCKET --token-stdin connects to the unix socket SOCKET (its
// caller's, in a directory both sides see) before PROG is looked up,
// writes the token (the first line of the relay's stdin, read before
// anything else there: never an environment or a command line, which
// every process in a container can read) and a newline, and gives PROG the socket
// itself as its stdin and stdout, so that PROG's messages pass no engine
// and no copy. The relay's own stdin then carries only signals and its
// EOF, as with --stdin framed or raw; stderr stays the relay's. A socket
// it cannot reach ends the relay with 125 and the reason on stderr,
// before PROG runs.
//
// --hold D --hold-socket PATH (with --stdin framed, --token-stdin, and
// --connect or --connect-fd N, a unix socket the relay inherits as fd N)
// keeps PROG when its caller goes away without stopping it: PROG's
// stdin, stdout and stderr are pipes whose far ends the relay hands the
// caller on the socket (one line of JSON, wire.Hello, with the
// descriptors) and keeps a copy of, so PROG reads no EOF and writes into
// no closed pipe when the caller is gone. The end of the relay's stdin,
// or of its parent, then starts a hold: the relay listens on PATH (in a
// directory of mode 0700 it makes if missing) and gives the first
// connection that says the token (the first line of its stdin) the same
// descriptors; that connection is then its control, as its stdin was
// (frames: signals, the empty frame that closes PROG's stdin; its end,
// another hold), and gets one last line with PROG's exit code. No caller
// within D: the tree ends as it would have at once, and a file named
// PATH.expired is left to say so. A signal, caught or framed, is an
// orderly stop and ends the tree at once, held or not.
//
// take --hold-socket PATH --connect SOCKET --token-stdin takes back a
// process a relay run --hold holds at PATH, for a Berth that cannot
// reach PATH itself (inside a container): it says the token (the second
// line of its stdin; the first is SOCKET's) and passes the program's
// stdio and its connection to the holding relay, the control, on to
// SOCKET, then exits (see takeMode).
//
// The relay never writes to its stdout, and to its stderr only when it
// fails itself or when dial --ready is connected (lines starting
// "berth-relay:"): PROG's output is PROG's alone. It never starts a
// shell, never touches a file outside /proc but the socket it is told to
// connect to and its hold socket (with that one's directory and note),
// never dials anything but a loopback address or that socket, and never
// leaves a process running behind it.
package main

import (
	"fmt"
	"os"

	"github.com/berth-dev/berth/enclosure/relay/wire"
)

const usage = `usage:
  berth-relay run [--grace D] [--stdin raw|framed|inherit] [--tag T] [--dir D] [--env K=V]... [--connect SOCKET | --connect-fd N] [--hold D --hold-socket PATH] [--token-stdin] -- PROG ARGS...
  berth-relay take --hold-socket PATH --connect SOCKET --token-stdin
  berth-relay signal PGID|tag=T SIGNAL
  berth-relay mem tag=T
  berth-relay dial [--ready] [127.0.0.1:]PORT
  berth-relay which NAME
  berth-relay version`

func main() {
	os.Exit(relay(os.Args[1:]))
}

func relay(args []string) int {
	if len(args) == 0 {
		return fail("%s", usage)
	}
	switch args[0] {
	case "run":
		return runMode(args[1:])
	case "take":
		return takeMode(args[1:])
	case "signal":
		return signalMode(args[1:])
	case "mem":
		return memMode(args[1:])
	case "dial":
		return dialMode(args[1:])
	case "which":
		return whichMode(args[1:])
	case "version":
		return versionMode(args[1:])
	}
	return fail("unknown mode %q\n%s", args[0], usage)
}

// fail reports the relay's own failure on stderr and returns its exit code.
func fail(format string, a ...any) int {
	fmt.Fprintf(os.Stderr, "berth-relay: "+format+"\n", a...)
	return wire.ExitRelayFailed
}
