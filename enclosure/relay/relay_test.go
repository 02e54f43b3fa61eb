package relay_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
	"github.com/berth-dev/berth/enclosure/relay/wire"
)

var bin *relay.Binary

func TestMain(m *testing.M) {
	relaytest.DriverMain(m, func(b *relay.Binary) (func() (int, error), error) {
		bin = b
		return nil, nil
	})
}

// The version Open computes is the one the relay prints itself.
//
// Issue 13 item 3.
func TestOpenReadsVersionAndArch(t *testing.T) {
	out, err := exec.Command(bin.Path, relay.VersionArgs(bin.Path)[1:]...).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != bin.Version {
		t.Fatalf("Open says version %s, the relay prints %s", bin.Version, got)
	}
	if bin.Arch != runtime.GOARCH {
		t.Fatalf("arch %s, built for %s", bin.Arch, runtime.GOARCH)
	}
	if want := "/opt/berth/relay-" + bin.Version + "/berth-relay"; relay.InstallPath(bin.Version) != want {
		t.Fatalf("InstallPath %s, the images use %s", relay.InstallPath(bin.Version), want)
	}
}

// Issue 13 item 3.
func TestOpenRefusesWhatIsNoStaticRelay(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "script")
	os.WriteFile(text, []byte("#!/bin/sh\n"), 0o755)
	if _, err := relay.Open(text); err == nil || !strings.Contains(err.Error(), "not a Linux executable") {
		t.Fatalf("a script: %v", err)
	}
	// A dynamically linked executable (the system's sh) needs a libc a
	// container may not have.
	sh, _ := exec.LookPath("sh")
	if _, err := relay.Open(sh); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Fatalf("%s: %v", sh, err)
	}
}

// Issue 13 item 3.
func TestFindPrefersTheEnvironment(t *testing.T) {
	t.Setenv(relay.EnvPath, bin.Path)
	b, err := relay.Find()
	if err != nil || b.Path != bin.Path {
		t.Fatalf("Find = %+v, %v", b, err)
	}
	t.Setenv(relay.EnvPath, filepath.Join(t.TempDir(), "missing"))
	if _, err := relay.Find(); err == nil || !strings.Contains(err.Error(), relay.EnvPath) {
		t.Fatalf("a missing $%s: %v", relay.EnvPath, err)
	}
}

// The argv builders speak the relay's own command line: a program run
// with them under the real relay gets its arguments, and which finds sh.
//
// Issue 13 item 3.
func TestArgvBuildersMatchTheRelay(t *testing.T) {
	dir := t.TempDir()
	argv := relay.RunArgs(bin.Path, relay.RunOptions{Grace: 500 * time.Millisecond, Stdin: relay.StdinFramed, Tag: relay.NewTag(), Dir: dir, Env: []string{"WHO=berth"}},
		"sh", "-c", `cat; echo "$0 $WHO $PWD"`, "arg0")
	cmd := exec.Command(argv[0], argv[1:]...)
	var stdin bytes.Buffer
	fw := relay.NewFrameWriter(&stdin)
	fw.Write([]byte("framed "))
	fw.Write([]byte("input\n"))
	fw.Close()
	if _, err := fw.Write([]byte("late")); !errors.Is(err, relay.ErrClosed) {
		t.Fatalf("a write after Close: %v", err)
	}
	cmd.Stdin = &stdin
	out, err := cmd.Output()
	if err != nil || string(out) != "framed input\narg0 berth "+dir+"\n" {
		t.Fatalf("run: %q, %v", out, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	argv = relay.DialArgs(bin.Path, ln.Addr().(*net.TCPAddr).Port)
	var dialErr bytes.Buffer
	dial := exec.Command(argv[0], argv[1:]...)
	dial.Stderr = &dialErr
	if err := dial.Run(); err != nil || dialErr.String() != wire.ReadyLine+"\n" {
		t.Fatalf("dial: %v, stderr %q", err, dialErr.String())
	}
	argv = relay.WhichArgs(bin.Path, "sh")
	out, err = exec.Command(argv[0], argv[1:]...).Output()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "/sh") {
		t.Fatalf("which: %q, %v", out, err)
	}
}

// Issue 13 item 3.
func TestFrameWriterSplitsLargeWrites(t *testing.T) {
	var buf bytes.Buffer
	fw := relay.NewFrameWriter(&buf)
	big := bytes.Repeat([]byte("x"), 3<<20+5)
	if n, err := fw.Write(big); n != len(big) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	var total int
	for buf.Len() > 0 {
		n := int(binary.BigEndian.Uint32(buf.Next(4)))
		if n == 0 || n > 1<<20 {
			t.Fatalf("frame of %d bytes", n)
		}
		total += len(buf.Next(n))
	}
	if total != len(big) {
		t.Fatalf("frames carry %d bytes, wrote %d", total, len(big))
	}
}
