package relayexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	pathpkg "path"
	"strings"
	"sync"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relay/wire"
)

var _ enclosure.Reattacher = (*Container)(nil)

// takeWait bounds the exec of "relay take" once the process was passed
// on: it exits at once.
const takeWait = 10 * time.Second

// Reattach takes back a process a Berth that went away left to its
// relay in the container (Cmd.Keep), once for every container driver.
// The relay's hold socket is in the container's own /tmp
// (relay.HoldDir), which Berth cannot reach, so an exec of "relay take"
// inside says the token there (on its stdin, never on its command line
// or in its environment) and passes the program's stdio and its
// connection to the holding relay on to Berth, through a stdio socket
// in hold.Dir as a kept start's relay hands them over; then it exits.
// From there Berth reads and writes the program's pipes and the holding
// relay's control directly, with no exec and no engine between: the
// process is a relay.Held, whose Kill is a framed SIGTERM (the relay's
// grace then SIGKILLs the tree), and whose Drop leaves it held again.
func (c *Container) Reattach(ctx context.Context, hold enclosure.Hold) (enclosure.Process, error) {
	if pathpkg.Dir(hold.Socket) != relay.HoldDir || !strings.HasSuffix(hold.Socket, ".sock") {
		return nil, fmt.Errorf("%s: a kept process's hold socket is in %s, not %s: the record was not written by Berth: %w", c.Where, relay.HoldDir, hold.Socket, enclosure.ErrInvalidConfig)
	}
	if hold.Token == "" || strings.ContainsAny(hold.Token, "\n") {
		return nil, fmt.Errorf("%s: the hold's token is empty or not one line: %w", c.Where, enclosure.ErrInvalidConfig)
	}
	tag := relay.NewTag()
	l := c.Sockets.Listen(hold.Dir, tag, c.HostPath)
	if l == nil {
		return nil, fmt.Errorf("%s: taking back the process held at %s needs a stdio socket in %q, a directory Berth and the container both see, and none can be made there (%s: exec, or the directory is not shared): %w", c.Where, hold.Socket, hold.Dir, c.Sockets.Key, enclosure.ErrNotSupported)
	}
	defer l.Close()
	stderr := &lockedBuffer{}
	s, err := c.Engine.Exec(ctx, Exec{Program: relay.Name + " take", Stderr: stderr, Socket: true,
		Argv: relay.TakeArgs(c.Relay, hold.Socket, pathpkg.Join(hold.Dir, l.Name))})
	if err != nil {
		return nil, err
	}
	defer func() {
		// take exits once it passed the process on, or failed; a take
		// that hangs is let go of (its stdin's end).
		go func() {
			select {
			case <-s.Ended():
			case <-time.After(takeWait):
				s.Drop()
			}
			_, _ = s.Wait()
		}()
	}()
	if _, err := s.Stdin().Write([]byte(l.TokenLine() + hold.Token + "\n")); err != nil {
		s.Drop()
		return nil, fmt.Errorf("%s: taking back the process held at %s: the relay's stdin: %w", c.Where, hold.Socket, err)
	}
	l.ExpectPeer(s.Pid())
	conn, err := l.Accept(ctx, s.Ended())
	if errors.Is(err, relay.ErrNotConnected) {
		return nil, c.notTaken(s, hold.Socket, stderr)
	}
	if err != nil {
		s.Drop()
		return nil, fmt.Errorf("%s: taking back the process held at %s: %w", c.Where, hold.Socket, err)
	}
	defer conn.Close()
	wait := handoverWait
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl))
	}
	h, ctl, err := relay.ReadTaken(conn, wait)
	if err != nil {
		s.Drop()
		return nil, fmt.Errorf("%s: taking back the process held at %s: %w", c.Where, hold.Socket, err)
	}
	return &taken{heldProc: relay.NewHeld(h, ctl, nil), c: c, tag: h.Tag}, nil
}

// notTaken is the error of a take that ended without passing anything
// on: its exit code says why, and its stderr more.
func (c *Container) notTaken(s Stream, socket string, stderr *lockedBuffer) error {
	code, err := s.Wait()
	if err != nil {
		return err // the container stopped, or its engine went
	}
	why := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(stderr.String()), "berth-relay: take: "))
	switch code {
	case wire.ExitTakeNone:
		return fmt.Errorf("%s: %s: %w", c.Where, why, os.ErrNotExist)
	case wire.ExitTakeExpired:
		return fmt.Errorf("%s: %s: %w", c.Where, why, enclosure.ErrHoldExpired)
	case wire.ExitTakeRefused:
		return fmt.Errorf("%s: %w: %s", c.Where, relay.ErrRefused, why)
	case wire.ExitRelayFailed:
		if strings.Contains(why, "unknown mode") {
			return fmt.Errorf("%s: the relay in the container (%s) is older than this Berth's and cannot take a process back (%s): install this Berth's relay: %w", c.Where, c.Relay, why, enclosure.ErrNotSupported)
		}
	}
	if why == "" {
		why = "no word on its stderr"
	}
	return fmt.Errorf("%s: taking back the process held at %s: the relay's take ended (exit %d): %s", c.Where, socket, code, why)
}

// taken is a process taken back in a container: the holding relay's
// control and the program's pipes (relay.Held), named by its relay's tag
// as a container's processes are, since the program's pid is the
// container's.
type taken struct {
	*heldProc
	c   *Container
	tag string
}

var (
	_ enclosure.Process  = (*taken)(nil)
	_ enclosure.Tagged   = (*taken)(nil)
	_ enclosure.Kept     = (*taken)(nil)
	_ enclosure.Dropper  = (*taken)(nil)
	_ enclosure.Resident = (*taken)(nil)
)

// Pid is unknown to Berth: the relay's Hello gives the pids the
// container sees.
func (t *taken) Pid() int    { return 0 }
func (t *taken) Tag() string { return t.tag }

// RSS asks the relay, in an exec, as for a process Berth started.
func (t *taken) RSS(ctx context.Context) (int64, error) {
	return relay.Memory(ctx, t.c.Engine.Run, t.c.Relay, t.tag, t.c.Where)
}

// heldProc names relay.Held for embedding, so that its method Held is
// promoted.
type heldProc = relay.Held

// lockedBuffer is an exec's stderr, written by the engine's copy and
// read once the exec ended.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 4<<10 {
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
