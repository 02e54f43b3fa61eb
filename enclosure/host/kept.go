package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/internal/procfs"
)

// handoverWait bounds a kept start's wait for its relay's handover,
// which comes as soon as the program started.
const handoverWait = 30 * time.Second

// startKept starts c under the relay with --hold (Cmd.Keep): the relay
// makes the program's stdio pipes and hands Berth their far ends on a
// socket pair, keeping a copy, so that a Berth that dies leaves the
// program reading no EOF and writing into no closed pipe; its stdin is
// the relay's control, framed (signals go by kill, as for every host
// process), whose end starts the hold. The program's pipes are the same
// OS pipes an unkept start gives it: Berth reads and writes them with no
// copy between.
func (e *Enclosure) startKept(path string, c enclosure.Cmd, relayPath string) (enclosure.Process, error) {
	if c.Keep.Dir == "" || c.Keep.Token == "" {
		return nil, fmt.Errorf("start %s: Cmd.Keep needs Dir and Token with its Grace: %w", path, enclosure.ErrInvalidConfig)
	}
	tag := relay.NewTag()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	ours, theirs := os.NewFile(uintptr(pair[0]), "handover"), os.NewFile(uintptr(pair[1]), "handover")
	defer theirs.Close()
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		ours.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(ours, ctlR, ctlW)
		return nil, err
	}
	argv := relay.RunArgs(relayPath, relay.RunOptions{Stdin: relay.StdinFramed, Tag: tag,
		Hold: c.Keep.Grace, HoldSocket: relay.HoldSocket(c.Keep.Dir, tag), ConnectFd: 3}, path, c.Args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = c.Dir
	cmd.Env = childEnv(e.opts.Drop, c.Env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdin, cmd.Stderr = ctlR, errW // stdout: /dev/null, the relay writes nothing there
	cmd.ExtraFiles = []*os.File{theirs}
	err = cmd.Start()
	closeAll(ctlR, errW)
	if err != nil {
		closeAll(ours, ctlW, errR)
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	frames := relay.NewFrameWriter(ctlW)
	h := &handle{cmd: cmd, relayed: true, stdinPipe: ctlW, done: make(chan struct{}), progKnown: make(chan struct{}), tag: tag}
	// The token first: the relay reads it before anything else.
	if _, err := io.WriteString(ctlW, c.Keep.Token+"\n"); err != nil {
		h.why = "the relay's stdin: " + err.Error()
	}
	handed, err := readHandover(ours)
	if err != nil {
		// The relay ended before the program started (not found, not
		// executable: its stderr says so and Wait has its code), or the
		// handover failed: a process with nothing to read.
		close(h.progKnown)
		empty, w, perr := os.Pipe()
		if perr == nil {
			w.Close()
		}
		h.stdin, h.stdout = frames, &eofCloser{f: empty}
		h.keepStderr(c.Stderr, errR, nil)
		go h.wait()
		return h, nil
	}
	h.prog = handed.Pid
	close(h.progKnown)
	h.held, h.why = handed.Hold, handed.HoldError
	h.stdin = relay.HeldStdin(handed.Stdin, frames)
	h.stdout = &eofCloser{f: handed.Stdout}
	h.handed = handed
	h.keepStderr(c.Stderr, errR, handed.Stderr)
	go h.wait()
	return h, nil
}

// readHandover reads the relay's handover from Berth's end of the pair.
func readHandover(f *os.File) (*relay.Handover, error) {
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return relay.ReadHandover(c.(*net.UnixConn), handoverWait)
}

// keepStderr gives the process one stderr of the relay's own and the
// program's (relay.MergeStderr); the owner waits for its copies.
func (h *handle) keepStderr(dst io.Writer, relayOwn io.ReadCloser, prog *os.File) {
	var src []io.ReadCloser
	src = append(src, relayOwn)
	if prog != nil {
		src = append(src, prog)
	}
	r, wait := relay.MergeStderr(dst, src...)
	if r != nil {
		h.stderr = r
	}
	h.waitStderr = wait
}

// Held is where the relay waits for a Berth that comes back ("" when it
// does not hold the process, and why says why).
func (h *handle) Held() (socket, tag, why string) { return h.held, h.tag, h.why }

// Drop lets go of a kept process as a Berth that died would: the
// relay's control ends with no signal, and Berth's copies of the
// program's stdio are closed; the relay holds the program. (An unkept
// process's relay ends its tree only when Berth, its parent, dies.)
func (h *handle) Drop() {
	h.stdinPipe.Close()
	if h.handed != nil {
		h.handed.Close()
	}
}

// Reattach takes back a process a Berth that went away left to its
// relay: hold is the state's record of it (its Dir unused). The process is
// Berth's again as if it had started it, but for its exit: the relay is
// no child of this Berth, and its last line says the code. Kill ends
// the tree at once, as for every host process (the relay's descendants,
// SIGKILL, which the relay reaps before it says the exit: killTree),
// after a framed SIGTERM.
func (e *Enclosure) Reattach(ctx context.Context, hold enclosure.Hold) (enclosure.Process, error) {
	socket := hold.Socket
	h, conn, err := relay.Reattach(ctx, socket, hold.Token)
	if err != nil {
		// The relay's note that it timed out waiting, read once.
		if note := socket + relay.ExpiredSuffix; os.Remove(note) == nil {
			return nil, fmt.Errorf("%s: its relay ended the process, no Berth having come back within its grace: %w", socket, enclosure.ErrHoldExpired)
		}
		return nil, err
	}
	relayPid := h.Relay
	return &taken{relay.NewHeld(h, conn, func() { killTree(relayPid, h.Tag) })}, nil
}

// taken is a process taken back from its relay, whose memory is read in
// /proc as a started one's is (a parked language server's counts
// against lsp.max_parked_rss_bytes).
type taken struct{ *heldProcess }

// heldProcess names the embedded relay.Held so that its Held method is
// promoted (a field named Held would hide it).
type heldProcess = relay.Held

// RSS is the resident memory of the program and everything it started.
func (p *taken) RSS(context.Context) (int64, error) { return treeRSS(p.Pid()) }

var _ enclosure.Resident = (*taken)(nil)

// killTree kills everything under the relay tagged tag at pid, if pid is
// still that relay (its command line carries the tag), and leaves the
// relay to reap it and say the exit, as Kill of a started process does;
// a relay still there after relayReapWait is killed too, after its
// descendants once more. The relay is no child of this Berth, so it is
// held by a pidfd: once it has exited, its pid may be another process's.
func killTree(pid int, tag string) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return // gone
	}
	p, ok := procfs.Read(pid)
	if !ok || !p.Live() || tag == "" || !slices.Contains(strings.Fields(p.Cmdline()), tag) {
		_ = unix.Close(fd)
		return
	}
	killDescendants(pid)
	go func() {
		defer unix.Close(fd)
		// The pidfd reads ready once the relay has exited.
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for deadline := time.Now().Add(relayReapWait); time.Now().Before(deadline); {
			n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds())+1)
			if n > 0 {
				return
			}
			if err != nil && !errors.Is(err, unix.EINTR) {
				break
			}
		}
		killDescendants(pid)
		_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	}()
}

var _ enclosure.Reattacher = (*Enclosure)(nil)
