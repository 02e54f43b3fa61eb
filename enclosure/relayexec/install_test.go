package relayexec

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/relay"
)

// box is a container as the relay's install sees it through a Runner:
// the relays it holds (path -> version), and the directories where a
// copy streamed through sh lands but cannot run (noexec mounts).
type box struct {
	mu     sync.Mutex
	relays map[string]string
	noexec map[string]bool
	// readOnly roots refuse a directory; a stream into one is never
	// started (it would stall a real kubelet: streamed counts them).
	readOnly map[string]bool
	streamed int
	noSh     bool
	copies   int // archive copies made
}

func (b *box) run(_ context.Context, argv []string, stdin io.Reader) (relay.Result, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case len(argv) == 2 && argv[1] == "version":
		if v, ok := b.relays[argv[0]]; ok && !b.noexec[filepath.Dir(filepath.Dir(argv[0]))] {
			return relay.Result{Stdout: v + "\n"}, nil
		}
		return relay.Result{Code: 127, Stderr: "not found"}, nil
	case argv[0] == "sh" && !b.noSh && argv[2] == relay.PrepareScript:
		if b.readOnly[filepath.Dir(argv[len(argv)-1])] {
			return relay.Result{Code: 1, Stderr: "mkdir: Read-only file system"}, nil
		}
		return relay.Result{}, nil
	case argv[0] == "sh" && !b.noSh:
		if b.readOnly[filepath.Dir(argv[len(argv)-1])] {
			b.streamed++
		}
		raw, _ := io.ReadAll(stdin)
		b.relays[argv[len(argv)-1]+"/"+relay.Name] = string(raw)
		return relay.Result{}, nil
	}
	return relay.Result{Code: 127, Stderr: argv[0] + ": not found"}, nil
}

func (b *box) CopyArchive(_ context.Context, bin *relay.Binary) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.copies++
	b.relays[relay.InstallPath(bin.Version)] = bin.Version
	return nil
}

// binary is a relay whose bytes are its version, so that a copy streamed
// into a box reports it.
func binary(t *testing.T) *relay.Binary {
	p := filepath.Join(t.TempDir(), relay.Name)
	if err := os.WriteFile(p, []byte("v1"), 0o755); err != nil {
		t.Fatal(err)
	}
	return &relay.Binary{Path: p, Version: "v1"}
}

// The relay's install order: where an earlier run put it, the image's
// copy, an archive copy where the engine has one, a copy streamed through
// sh (past roots it cannot run from); nothing that works is an error
// naming each try (issue 27 item 1: the order the drivers share).
func TestInstallerTriesEachWayInOrder(t *testing.T) {
	bin := binary(t)
	fixed := relay.InstallPath(bin.Version)
	streamed := relay.InstallDir("/tmp/.berth", bin.Version) + "/" + relay.Name
	for _, c := range []struct {
		name     string
		b        *box
		archive  bool
		path     string
		how      string
		wantFail bool
	}{
		{name: "baked", b: &box{relays: map[string]string{fixed: "v1"}}, path: fixed, how: "baked into the image"},
		{name: "archive", b: &box{relays: map[string]string{}}, archive: true, path: fixed, how: "archive copy"},
		{name: "streamed past a noexec root", b: &box{relays: map[string]string{}, noexec: map[string]bool{"/opt/berth": true}}, path: streamed, how: "streamed through sh"},
		{name: "streamed past a read-only root", b: &box{relays: map[string]string{}, readOnly: map[string]bool{"/opt/berth": true}}, path: streamed, how: "streamed through sh"},
		{name: "nowhere", b: &box{relays: map[string]string{}, noSh: true}, wantFail: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var i Installer
			in := Install{Key: "box", Where: "test box", Run: c.b.run, Advice: "give it sh"}
			if c.archive {
				in.Copy = c.b
			}
			p, how, err := i.Install(context.Background(), in, bin)
			if c.wantFail {
				if !errors.Is(err, enclosure.ErrNotSupported) || !strings.Contains(err.Error(), "tried: ") || !strings.Contains(err.Error(), "give it sh") {
					t.Fatalf("Install with nowhere to go = %q, %v; want ErrNotSupported naming what it tried", p, err)
				}
				return
			}
			if err != nil || p != c.path || how != c.how {
				t.Fatalf("Install = %q (%s), %v; want %q (%s)", p, how, err, c.path, c.how)
			}
			if c.b.streamed != 0 {
				t.Fatalf("%d streams into a read-only root: its directory is made first, with no stdin", c.b.streamed)
			}
			// A second install in the same container checks that place
			// first, and copies nothing again.
			copies := c.b.copies
			if p2, how, err := i.Install(context.Background(), in, bin); err != nil || p2 != p || how != "installed by an earlier run" || c.b.copies != copies {
				t.Fatalf("a second Install = %q (%s), %v, %d copies; want %q installed by an earlier run", p2, how, err, c.b.copies, p)
			}
		})
	}
}

// A stdio key takes socket or exec, and says which when given another.
func TestCheckStdioNamesTheKeyAndTheChoices(t *testing.T) {
	for _, v := range []string{"", StdioSocket, StdioExec} {
		if err := CheckStdio("docker.stdio", v); err != nil {
			t.Errorf("CheckStdio(%q) = %v", v, err)
		}
	}
	if err := CheckStdio("docker.stdio", "tty"); !errors.Is(err, enclosure.ErrInvalidConfig) || !strings.Contains(err.Error(), `docker.stdio "tty": use socket or exec`) {
		t.Errorf("CheckStdio(tty) = %v", err)
	}
}
