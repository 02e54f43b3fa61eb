package containerd

import (
	"context"
	"fmt"
	"io"
	"net"

	"github.com/berth-dev/berth/enclosure/relay"
)

// dialConn turns h, an exec of "relay dial --ready" under "relay run",
// into a connection once the relay says on stderr that it is connected.
// Reads and writes go through a net.Pipe (which gives them deadlines) to
// the exec's stdout and stdin FIFOs; closing the connection closes stdin,
// whose EOF ends the relay.
func dialConn(ctx context.Context, h *proc, what string) (net.Conn, error) {
	mine, theirs := net.Pipe()
	go func() {
		_, _ = io.Copy(theirs, h.Stdout())
		theirs.Close()
	}()
	go func() {
		_, _ = io.Copy(h.stdinW, theirs)
		h.kill()
	}()
	ready := relay.DialReady(h.Stderr())
	select {
	case err := <-ready:
		if err == nil {
			return mine, nil
		}
		mine.Close()
		code, _ := h.Wait()
		return nil, fmt.Errorf("nothing accepts connections on %s (relay dial: exit %d: %v)", what, code, err)
	case <-ctx.Done():
		mine.Close()
		return nil, fmt.Errorf("connecting to %s: %w", what, ctx.Err())
	}
}
