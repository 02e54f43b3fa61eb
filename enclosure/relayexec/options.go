package relayexec

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/mounts"
	"github.com/berth-dev/berth/enclosure/relay"
)

// How a process's stdin and stdout travel: each container driver's stdio
// key (docker.stdio, containerd.stdio, kubernetes.stdio).
const (
	// StdioSocket passes them through a unix socket in the process's
	// working directory, which Berth and the container both see: no
	// engine between Berth and the program. Where the directory is not
	// shared, or the socket cannot be made or reached, the exec's stream
	// carries them instead. The default.
	StdioSocket = "socket"
	// StdioExec passes them in the exec's stream, through the engine.
	StdioExec = "exec"
)

// CheckStdio says what is wrong with v as the value of the stdio key key.
func CheckStdio(key, v string) error {
	if v != "" && v != StdioSocket && v != StdioExec {
		return fmt.Errorf("%s %q: use %s or %s: %w", key, v, StdioSocket, StdioExec, enclosure.ErrInvalidConfig)
	}
	return nil
}

// NewSockets is a container's choice of stdio, as its driver's stdio
// key (key, its value stdio) says; where names the container.
func NewSockets(stdio, key, where string, log *slog.Logger) *relay.Sockets {
	return &relay.Sockets{Off: stdio == StdioExec, Where: where, Key: key, Log: log}
}

// Shared are the options every container driver takes beside its own
// configuration section.
type Shared struct {
	// PathMap is enclosure.path_map, for a Berth that runs in a container
	// of its own: each entry's Source is a host path and its Destination
	// the same directory as Berth sees it. Empty: the driver's own way
	// (Berth's own container's mounts, for Docker), else Berth's paths are
	// the host's.
	PathMap mounts.Table
	// Relay returns the relay to install; nil: relay.Find.
	Relay func() (*relay.Binary, error)
	// Log receives what the driver decides on its own (how it found
	// Berth's paths, where the relay came from, a fallback); nil: none.
	Log *slog.Logger
}

// WithDefaults fills in what is unset.
func (s Shared) WithDefaults() Shared {
	if s.Relay == nil {
		s.Relay = relay.Find
	}
	if s.Log == nil {
		s.Log = slog.New(slog.DiscardHandler)
	}
	return s
}

// FindRelay is s.Relay asked once, when a container first needs the
// relay; where names the driver for the error.
func (s Shared) FindRelay(where string) func() (*relay.Binary, error) {
	once := sync.OnceValues(s.Relay)
	return func() (*relay.Binary, error) {
		bin, err := once()
		if err != nil {
			return nil, fmt.Errorf("%s: the relay Berth installs into containers: %w", where, err)
		}
		return bin, nil
	}
}
