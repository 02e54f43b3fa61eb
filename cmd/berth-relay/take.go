//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/berth-dev/berth/enclosure/relay/wire"
)

// takeMode is "take --hold-socket PATH --connect SOCKET --token-stdin":
// a Berth that came back runs it in an exec inside a container, to take
// back a process a relay there holds (run --hold), whose hold socket
// Berth cannot reach from outside. Its stdin's first line is the token
// of SOCKET (Berth's, in the workdir), its second the hold's token:
// never a command line or an environment. take connects to PATH, says
// the hold's token, reads the holding relay's Hello with the program's
// stdio, connects to SOCKET and passes on the Hello and its descriptors
// with one more, the connection to the holding relay (wire.FdControl),
// which is from then on Berth's control of it. Then it exits 0, and
// nothing of it stands between Berth and the program.
//
// It took nothing when it exits with wire.ExitTakeNone (no relay holds
// at PATH), ExitTakeExpired (the relay had ended the process past its
// grace: take removes its note) or ExitTakeRefused (the relay refused:
// a wrong token, another Berth attached), each with the reason on
// stderr; ExitRelayFailed for anything else (SOCKET unreachable, bad
// usage).
func takeMode(args []string) int {
	fs := flag.NewFlagSet("take", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var hold, connect string
	var tokenStdin bool
	fs.StringVar(&hold, "hold-socket", "", "")
	fs.StringVar(&connect, "connect", "", "")
	fs.BoolVar(&tokenStdin, "token-stdin", false, "")
	if err := fs.Parse(args); err != nil {
		return fail("take: %v", err)
	}
	switch {
	case fs.NArg() > 0:
		return fail("take: unexpected arguments %q", fs.Args())
	case !strings.HasPrefix(hold, "/"):
		return fail("take: give --hold-socket, the holding relay's socket, as an absolute path")
	case connect == "":
		return fail("take: give --connect, the socket to pass the process on to")
	case !tokenStdin:
		return fail("take: its tokens are the first two lines of stdin: give --token-stdin")
	}
	stdioToken, err := readToken(os.Stdin)
	if err != nil {
		return fail("take: the stdio socket's token: %v", err)
	}
	holdToken, err := readToken(os.Stdin)
	if err != nil {
		return fail("take: the hold's token: %v", err)
	}
	ctl, err := connectStdio(hold, holdToken)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ECONNREFUSED) {
			if unix.Unlink(hold+".expired") == nil {
				fmt.Fprintf(os.Stderr, "berth-relay: take: the relay at %s ended its process, no Berth having come back within its grace\n", hold)
				return wire.ExitTakeExpired
			}
			fmt.Fprintf(os.Stderr, "berth-relay: take: no relay holds a process at %s (%v): it ended\n", hold, err)
			return wire.ExitTakeNone
		}
		return fail("take: connecting to %s: %v", hold, err)
	}
	m, fds, err := readHelloFd(ctl)
	if err != nil {
		return fail("take: %s: %v", hold, err)
	}
	if m.Refused != "" {
		fmt.Fprintf(os.Stderr, "berth-relay: take: the relay at %s refused: %s\n", hold, m.Refused)
		return wire.ExitTakeRefused
	}
	to, err := connectStdio(connect, stdioToken)
	if err != nil {
		return fail("take: connecting to Berth's socket %s: %v", connect, err)
	}
	m.Fds = append(m.Fds, wire.FdControl)
	fds = append(fds, ctl)
	b, err := json.Marshal(m)
	if err != nil {
		return fail("take: %v", err)
	}
	if err := unix.Sendmsg(to, append(b, '\n'), unix.UnixRights(fds...), nil, 0); err != nil {
		return fail("take: passing the process on to %s: %v", connect, err)
	}
	return 0
}

// readHelloFd reads a holding relay's Hello line and the descriptors
// that come with it from fd, a byte at a time, so that nothing after
// the line (the relay's last line, should the program end at once) is
// taken; the descriptors come with the line's first byte.
func readHelloFd(fd int) (wire.Hello, []int, error) {
	var (
		m    wire.Hello
		line []byte
		fds  []int
		b    = make([]byte, 1)
		oob  = make([]byte, unix.CmsgSpace(8*4))
	)
	closeFds := func() {
		for _, f := range fds {
			unix.Close(f)
		}
	}
	for len(line) < wire.MaxHello {
		n, oobn, _, _, err := unix.Recvmsg(fd, b, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if oobn > 0 {
			if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
				for _, cm := range msgs {
					if got, rerr := unix.ParseUnixRights(&cm); rerr == nil {
						fds = append(fds, got...)
					}
				}
			}
		}
		if err != nil {
			closeFds()
			return m, nil, fmt.Errorf("reading the relay's answer: %w", err)
		}
		if n == 0 {
			closeFds()
			return m, nil, errors.New("the relay closed the connection without an answer")
		}
		if b[0] != '\n' {
			line = append(line, b[0])
			continue
		}
		if err := json.Unmarshal(line, &m); err != nil {
			closeFds()
			return m, nil, fmt.Errorf("the relay's answer %.80q: %v", line, err)
		}
		if m.Refused == "" && len(fds) != len(m.Fds) {
			closeFds()
			return m, nil, fmt.Errorf("the relay's answer names %d descriptors and came with %d", len(m.Fds), len(fds))
		}
		return m, fds, nil
	}
	closeFds()
	return m, nil, fmt.Errorf("the relay's answer is no line of at most %d bytes", wire.MaxHello)
}
