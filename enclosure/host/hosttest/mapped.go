// Package hosttest gives tests a host enclosure whose processes see the
// workdir at another path, as a container's processes see it at its mount
// point, so that the path contract (callers pass MapPath's results and map
// what comes back with HostPath) is tested with real servers on the host.
package hosttest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/host"
)

// Mapped is the host enclosure seen through View, a symlink to Workdir:
// MapPath turns a path under Workdir into the same path under View,
// HostPath turns it back, and any other path is an error, as a path
// outside a container's mounts is. It records the commands it starts and
// every byte written to their stdin, so a test can check that the
// processes were given View's paths and never Workdir's.
type Mapped struct {
	host          enclosure.Enclosure
	Workdir, View string
	// ReadOnly makes the view a read-only mount: Writable refuses every
	// path under Workdir.
	ReadOnly bool

	mu    sync.Mutex
	cmds  []enclosure.Cmd
	stdin bytes.Buffer
}

var _ enclosure.Enclosure = (*Mapped)(nil)

// NewMapped maps workdir (a resolved, absolute path) to a fresh symlink
// to it, outside it.
func NewMapped(t testing.TB, workdir string) *Mapped {
	t.Helper()
	view := filepath.Join(t.TempDir(), "view")
	if err := os.Symlink(workdir, view); err != nil {
		t.Fatal(err)
	}
	return &Mapped{host: host.New(), Workdir: workdir, View: view}
}

// Driver is "mapped": not "host", so callers treat it as a container.
func (m *Mapped) Driver() string { return "mapped" }

// Capabilities are a container's (the zero value): its files are seen
// through the view only.
func (m *Mapped) Capabilities() enclosure.Capabilities { return enclosure.Capabilities{} }

// ID is the host's.
func (m *Mapped) ID() string { return m.host.ID() }

// LookPath is the host's.
func (m *Mapped) LookPath(ctx context.Context, name string) (string, error) {
	return m.host.LookPath(ctx, name)
}

// Dial is the host's.
func (m *Mapped) Dial(ctx context.Context, port int) (net.Conn, error) {
	return m.host.Dial(ctx, port)
}

// MapPath maps Workdir to View.
func (m *Mapped) MapPath(hostPath string) (string, error) {
	return move(hostPath, m.Workdir, m.View)
}

// HostPath maps View back to Workdir.
func (m *Mapped) HostPath(enclosedPath string) (string, error) {
	return move(enclosedPath, m.View, m.Workdir)
}

// Writable refuses a path under Workdir when ReadOnly is set.
func (m *Mapped) Writable(hostPath string) error {
	if _, err := move(hostPath, m.Workdir, m.View); err != nil || !m.ReadOnly {
		return nil
	}
	p, _ := move(hostPath, m.Workdir, m.View)
	return fmt.Errorf("%s is on a read-only mount of the mapped enclosure at %s", p, m.View)
}

func move(p, from, to string) (string, error) {
	p = filepath.Clean(p)
	if p == from {
		return to, nil
	}
	if rel, ok := strings.CutPrefix(p, from+"/"); ok {
		return filepath.Join(to, rel), nil
	}
	return "", fmt.Errorf("%s is outside %s: %w", p, from, enclosure.ErrNotFound)
}

// Start starts c on the host, recording it and what its stdin is given.
func (m *Mapped) Start(ctx context.Context, c enclosure.Cmd) (enclosure.Process, error) {
	m.mu.Lock()
	m.cmds = append(m.cmds, c)
	m.mu.Unlock()
	p, err := m.host.Start(ctx, c)
	if err != nil {
		return nil, err
	}
	return &recorded{Process: p, stdin: &teeCloser{WriteCloser: p.Stdin(), m: m}}, nil
}

// Cmds are the commands started so far.
func (m *Mapped) Cmds() []enclosure.Cmd {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]enclosure.Cmd(nil), m.cmds...)
}

// Stdin is everything written to the processes' stdin so far.
func (m *Mapped) Stdin() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stdin.String()
}

type recorded struct {
	enclosure.Process
	stdin io.WriteCloser
}

func (r *recorded) Stdin() io.WriteCloser { return r.stdin }

type teeCloser struct {
	io.WriteCloser
	m *Mapped
}

func (t *teeCloser) Write(p []byte) (int, error) {
	t.m.mu.Lock()
	t.m.stdin.Write(p)
	t.m.mu.Unlock()
	return t.WriteCloser.Write(p)
}
