package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-dev/berth/enclosure/relay/wire"
	"github.com/berth-dev/berth/internal/errclass"
)

// A relay run with RunOptions.Hold keeps its program when Berth goes
// away without stopping it (a crash, a kill -9, an upgrade that hands
// over): the program's stdin, stdout and stderr are pipes whose far
// ends the relay hands Berth (a Handover, on the start's socket) and
// keeps a copy of, so the program reads no EOF and writes into no closed
// pipe; when its control (its stdin) ends without a signal, the relay
// waits the hold's grace for a Berth to connect to its hold socket with
// the token (Reattach), and ends the tree as it would have at once when
// none does. A signal (Kill, Stop) is an orderly stop: it never holds.

// HoldDir is where a relay in a container listens for a Berth that comes
// back: a directory the relay makes, of mode 0700, in the container's
// own temporary directory, never a workdir (whatever runs there could
// reach it; the token keeps it out, but the socket would be in the
// user's files).
const HoldDir = "/tmp/.berth-relays"

// HoldSocket is the hold socket of the relay tagged tag in dir.
func HoldSocket(dir, tag string) string { return filepath.Join(dir, tag+".sock") }

// ExpiredSuffix is added to a hold socket's name for the file a relay
// leaves when it ended its tree because no Berth came back in time.
const ExpiredSuffix = ".expired"

// Handover is a held program's stdio, as its relay hands it over.
type Handover struct {
	wire.Hello
	// Stdin is the write end of the program's stdin; nil when a Berth
	// had closed it. Closing it is not enough to close the program's
	// stdin: the relay keeps a copy until told (an empty frame,
	// FrameWriter.Close).
	Stdin *os.File
	// Stdout and Stderr are the read ends of the program's.
	Stdout, Stderr *os.File
	// Control is the connection to the holding relay that "berth-relay
	// take" passed on (ReadTaken); nil in any other handover.
	Control *os.File
}

// Close closes what Berth holds of h.
func (h *Handover) Close() {
	for _, f := range []*os.File{h.Stdin, h.Stdout, h.Stderr, h.Control} {
		if f != nil {
			f.Close()
		}
	}
}

// ErrRefused wraps a relay's refusal of a Berth that came back.
var ErrRefused = errclass.Case("the relay refused", errclass.ErrPermission)

// ReadHandover reads a relay's Hello and the descriptors it sends with
// it from conn, within d. A Hello that is a refusal is an error wrapping
// ErrRefused with the relay's reason; a connection that ends first is
// io.EOF's error.
func ReadHandover(conn *net.UnixConn, d time.Duration) (*Handover, error) {
	m, files, err := readHello(conn, d)
	if err != nil {
		return nil, err
	}
	h := &Handover{Hello: m}
	for i, name := range h.Fds {
		f := files[i]
		switch name {
		case wire.FdStdin:
			h.Stdin = f
		case wire.FdStdout:
			h.Stdout = f
		case wire.FdStderr:
			h.Stderr = f
		case wire.FdControl:
			h.Control = f
		default:
			f.Close()
		}
	}
	if h.Stdout == nil || h.Stderr == nil {
		h.Close()
		return nil, errors.New("the relay's handover lacks the program's stdout or stderr")
	}
	return h, nil
}

// readHello reads one Hello line and the descriptors that came with it.
func readHello(conn *net.UnixConn, d time.Duration) (wire.Hello, []*os.File, error) {
	var m wire.Hello
	if d > 0 {
		_ = conn.SetReadDeadline(time.Now().Add(d))
		defer conn.SetReadDeadline(time.Time{})
	}
	var (
		line  []byte
		files []*os.File
		buf   = make([]byte, wire.MaxHello)
		oob   = make([]byte, unix.CmsgSpace(8*4))
	)
	closeFiles := func() {
		for _, f := range files {
			f.Close()
		}
	}
	for !bytes.Contains(line, []byte{'\n'}) {
		// One byte past the line at most: what follows it is another
		// message (a reattached relay's exit line), with no descriptor.
		n, oobn, _, _, err := conn.ReadMsgUnix(buf[:min(len(buf), wire.MaxHello-len(line))], oob)
		n, oobn = max(n, 0), max(oobn, 0)
		if oobn > 0 {
			fs, perr := parseRights(oob[:oobn])
			files = append(files, fs...)
			if perr != nil {
				closeFiles()
				return m, nil, perr
			}
		}
		line = append(line, buf[:n]...)
		if err != nil {
			closeFiles()
			return m, nil, fmt.Errorf("reading the relay's handover: %w", err)
		}
		if len(line) >= wire.MaxHello && !bytes.Contains(line, []byte{'\n'}) {
			closeFiles()
			return m, nil, fmt.Errorf("the relay's handover is no line of at most %d bytes", wire.MaxHello)
		}
	}
	line, _, _ = bytes.Cut(line, []byte{'\n'})
	if err := json.Unmarshal(line, &m); err != nil {
		closeFiles()
		return m, nil, fmt.Errorf("the relay's handover %.80q: %v", line, err)
	}
	if m.Refused != "" {
		closeFiles()
		return m, nil, fmt.Errorf("%w: %s", ErrRefused, m.Refused)
	}
	if len(files) != len(m.Fds) {
		closeFiles()
		return m, nil, fmt.Errorf("the relay's handover names %d descriptors and came with %d", len(m.Fds), len(files))
	}
	return m, files, nil
}

// parseRights turns the descriptors in oob into files, non-blocking so
// that Go's poller waits for them (they are pipes), and closed on exec.
func parseRights(oob []byte) ([]*os.File, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("the relay's handover: %w", err)
	}
	var files []*os.File
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			unix.CloseOnExec(fd)
			_ = unix.SetNonblock(fd, true)
			files = append(files, os.NewFile(uintptr(fd), "relay-pipe"))
		}
	}
	return files, nil
}

// handoverWait bounds the wait for a relay's handover: it sends it as
// soon as its program started, or on a Berth's token.
const handoverWait = 30 * time.Second

// Reattach connects to the hold socket at path (as Berth sees it: on the
// host, in the state directory), says token, and returns the program's
// stdio and the connection, which is from then on the relay's control:
// frames to it (FrameWriter: signals, and the empty frame that closes the
// program's stdin), its end without a signal a new hold, and its last
// line the program's exit (ReadExit). A relay that is not there is an
// error wrapping os.ErrNotExist or unix.ECONNREFUSED; one that refuses
// the token, ErrRefused.
func Reattach(ctx context.Context, path, token string) (*Handover, *net.UnixConn, error) {
	conn, err := dialUnix(ctx, path)
	if err != nil {
		return nil, nil, err
	}
	_ = conn.SetWriteDeadline(time.Now().Add(handoverWait))
	if _, err := conn.Write([]byte(token + "\n")); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("saying the token to %s: %w", path, err)
	}
	_ = conn.SetWriteDeadline(time.Time{})
	wait := handoverWait
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl))
	}
	h, err := ReadHandover(conn, wait)
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return h, conn, nil
}

// TakeArgs is the command line of "berth-relay take": run in an exec
// inside a container, it takes back the process the relay holding at
// hold (as the container sees it) holds, and passes it on to the stdio
// socket at connect (ReadTaken). Its stdin's first line is connect's
// token, its second the hold's.
func TakeArgs(relayPath, hold, connect string) []string {
	return []string{relayPath, "take", "--hold-socket", hold, "--connect", connect, "--token-stdin"}
}

// ReadTaken reads what "berth-relay take" passes on over conn, within
// d: the holding relay's handover and the connection to it, which is
// from then on the relay's control (as Reattach's).
func ReadTaken(conn *net.UnixConn, d time.Duration) (*Handover, *net.UnixConn, error) {
	h, err := ReadHandover(conn, d)
	if err != nil {
		return nil, nil, err
	}
	if h.Control == nil {
		h.Close()
		return nil, nil, errors.New("the relay's take passed on no control connection")
	}
	c, err := net.FileConn(h.Control)
	h.Control.Close()
	h.Control = nil
	if err != nil {
		h.Close()
		return nil, nil, fmt.Errorf("the control connection passed on: %w", err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		h.Close()
		return nil, nil, errors.New("the control connection passed on is no unix socket")
	}
	return h, uc, nil
}

// dialUnix connects to the unix socket at path, through its directory's
// descriptor when the path is longer than an address holds.
func dialUnix(ctx context.Context, path string) (*net.UnixConn, error) {
	addr := path
	if len(path) > 107 {
		d, err := os.Open(filepath.Dir(path))
		if err != nil {
			return nil, err
		}
		defer d.Close()
		addr = "/proc/self/fd/" + strconv.Itoa(int(d.Fd())) + "/" + filepath.Base(path)
	}
	var dl net.Dialer
	c, err := dl.DialContext(ctx, "unix", addr)
	if err != nil {
		return nil, err
	}
	return c.(*net.UnixConn), nil
}

// ReadExit waits for a reattached relay's last line and returns the
// program's exit code (128+N for a signal N); an error when the
// connection ends without one (the relay was killed, or is gone).
func ReadExit(conn *net.UnixConn) (int, error) {
	m, files, err := readHello(conn, 0)
	if err != nil {
		return -1, err
	}
	for _, f := range files {
		f.Close()
	}
	if m.Exit == nil {
		return -1, errors.New("the relay's last line has no exit code")
	}
	return *m.Exit, nil
}
