//go:build linux

package main

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-dev/berth/enclosure/relay/wire"
)

// holder is run --hold: the relay keeps PROG's stdio pipes open (the far
// ends Berth reads and writes, duplicated) so that PROG sees nothing when
// Berth goes away, and listens on a unix socket for a Berth that comes
// back with the token. The loop owns every field but ln and reqs.
type holder struct {
	grace time.Duration
	token string
	tag   string
	path  string // the socket
	dir   *os.File
	ln    *net.UnixListener // nil: not holding (why says why)
	why   string
	reqs  chan *net.UnixConn // connections that said the token
	quit  chan struct{}

	// The far ends of PROG's stdout and stderr; its stdin's is the
	// runner's childInput.
	stdout, stderr *os.File
}

// tokenWait bounds a connection's token.
const tokenWait = 2 * time.Second

// maxChecks bounds the connections whose token is read at once.
const maxChecks = 16

// listen makes the hold socket at path: in a directory made with mode
// 0700 if missing, and refused if it is another user's or open to others
// (anyone who can reach the socket may try tokens). A failure is not the
// run's: the relay runs without holding, and says why in its Hello.
func (h *holder) listen() {
	dir := filepath.Dir(h.path)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		h.why = fmt.Sprintf("making %s: %v", dir, err)
		return
	}
	d, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		h.why = fmt.Sprintf("opening %s: %v", dir, err)
		return
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(d.Fd()), &st); err != nil {
		d.Close()
		h.why = fmt.Sprintf("%s: %v", dir, err)
		return
	}
	if int(st.Uid) != os.Geteuid() || st.Mode&0o077 != 0 {
		d.Close()
		h.why = fmt.Sprintf("%s is uid %d's with mode %04o: the relay listens only in a directory of its own user's that nobody else can enter", dir, st.Uid, st.Mode&0o777)
		return
	}
	// Through the directory's descriptor: an address holds 107 bytes,
	// and the directory stays the one checked.
	addr := "/proc/self/fd/" + strconv.Itoa(int(d.Fd())) + "/" + filepath.Base(h.path)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		d.Close()
		h.why = fmt.Sprintf("listening on %s: %v", h.path, err)
		return
	}
	ln.SetUnlinkOnClose(false) // close removes it, through the descriptor
	h.dir, h.ln = d, ln
	h.reqs = make(chan *net.UnixConn)
	h.quit = make(chan struct{})
	go h.accept()
}

// accept takes connections until the listener closes and hands the loop
// those that say the token; the others get a refusal and are closed.
// Tokens are read side by side, so a stranger that says nothing holds up
// no Berth.
func (h *holder) accept() {
	slots := make(chan struct{}, maxChecks)
	for {
		conn, err := h.ln.AcceptUnix()
		if err != nil {
			return
		}
		select {
		case slots <- struct{}{}:
		case <-h.quit:
			conn.Close()
			return
		}
		go func() {
			defer func() { <-slots }()
			if !h.check(conn) {
				refuse(conn, "wrong token: a Berth that comes back says the token from its state directory's record")
				return
			}
			select {
			case h.reqs <- conn:
			case <-h.quit:
				refuse(conn, "the program is ending")
			}
		}()
	}
}

// check reads conn's first line and says whether it is the token.
func (h *holder) check(conn *net.UnixConn) bool {
	_ = conn.SetReadDeadline(time.Now().Add(tokenWait))
	got := make([]byte, len(h.token)+1)
	if _, err := io.ReadFull(conn, got); err != nil {
		return false
	}
	_ = conn.SetReadDeadline(time.Time{})
	return subtle.ConstantTimeCompare(got, []byte(h.token+"\n")) == 1
}

// refuse tells conn why and closes it.
func refuse(conn *net.UnixConn, why string) {
	_ = conn.SetWriteDeadline(time.Now().Add(tokenWait))
	_ = sendHello(conn, wire.Hello{Refused: why}, nil)
	conn.Close()
}

// stop stops listening, removes the socket, and, when the relay ends
// its tree because no Berth came back within the grace, leaves a file
// beside it saying so (the socket's name and .expired), which a Berth
// that later reads the record counts.
func (h *holder) stop(expired bool) {
	if h == nil || h.ln == nil {
		return
	}
	close(h.quit)
	h.ln.Close()
	name := filepath.Base(h.path)
	_ = unix.Unlinkat(int(h.dir.Fd()), name, 0)
	if expired {
		if fd, err := unix.Openat(int(h.dir.Fd()), name+".expired", unix.O_CREAT|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600); err == nil {
			unix.Close(fd)
		}
	}
	h.dir.Close()
	h.ln = nil
}

// hello is the Hello that hands PROG's stdio over, with its descriptors:
// stdin's write end while Berth has not closed it, stdout's and stderr's
// read ends.
func (h *holder) hello(pid int, stdin *os.File) (wire.Hello, []*os.File) {
	m := wire.Hello{Pid: pid, Relay: os.Getpid(), Tag: h.tag, Hold: h.path, HoldError: h.why}
	if h.ln == nil {
		m.Hold = ""
	}
	var files []*os.File
	if stdin != nil {
		m.Fds, files = append(m.Fds, wire.FdStdin), append(files, stdin)
	}
	m.Fds = append(m.Fds, wire.FdStdout, wire.FdStderr)
	files = append(files, h.stdout, h.stderr)
	return m, files
}

// sendHello writes m as a line, with files' descriptors.
func sendHello(conn *net.UnixConn, m wire.Hello, files []*os.File) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	_, _, err = conn.WriteMsgUnix(append(b, '\n'), oob, nil)
	return err
}

// sendExit writes the last line, with the program's exit code.
func sendExit(conn *net.UnixConn, code int) {
	_ = conn.SetWriteDeadline(time.Now().Add(tokenWait))
	_ = sendHello(conn, wire.Hello{Exit: &code}, nil)
}

// stdioPipes makes PROG's stdin, stdout and stderr as pipes, blocking
// (a non-blocking stdin fails reads with EAGAIN in most runtimes): the
// ends PROG gets, and the far ends, which the relay keeps and hands to
// Berth.
func stdioPipes() (prog, far [3]*os.File, err error) {
	for i := range 3 {
		var p [2]int
		if err = unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			for j := range i {
				prog[j].Close()
				far[j].Close()
			}
			return prog, far, err
		}
		r, w := os.NewFile(uintptr(p[0]), "pipe"), os.NewFile(uintptr(p[1]), "pipe")
		if i == 0 {
			prog[i], far[i] = r, w
		} else {
			prog[i], far[i] = w, r
		}
	}
	growPipe(int(prog[1].Fd()), stdoutPipeBytes)
	return prog, far, nil
}

// stdoutPipeBytes is asked for PROG's stdout pipe, as the host driver
// asks for its own: a language server's answer runs to a hundred
// kilobytes and more, and past the pipe's capacity it waits for each
// read of Berth's.
const stdoutPipeBytes = 256 << 10

func growPipe(fd, size int) { _, _ = unix.FcntlInt(uintptr(fd), unix.F_SETPIPE_SZ, size) }

// connFile turns a connected unix socket's descriptor into a connection.
func connFile(f *os.File) (*net.UnixConn, error) {
	c, err := net.FileConn(f)
	f.Close() // FileConn made its own copy
	if err != nil {
		return nil, err
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, errors.New("not a unix socket")
	}
	return uc, nil
}
