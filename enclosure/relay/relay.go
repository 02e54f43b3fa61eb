// Package relay is the client side of Berth's relay (cmd/berth-relay): it
// finds the relay binary Berth ships, tells its version and architecture,
// builds the command lines of the relay's modes, and listens for a
// program's stdio on a socket (StdioListener, Sockets). Every enclosure
// driver runs its processes under the relay, so that nothing a run starts
// outlives it; the container drivers also install it into the container
// (each with its engine's copy API) at InstallPath.
//
// The relay's version is the first 16 hex digits of the SHA-256 of its
// executable, as "berth-relay version" prints it: a copy in a container
// whose version matches is the very binary Berth carries.
package relay

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/berth-dev/berth/enclosure/relay/wire"
)

// Name is the relay's executable name.
const Name = "berth-relay"

// EnvPath names the variable that points Berth at a relay binary of its
// choosing, before the one next to its executable and the one on PATH.
const EnvPath = "BERTH_RELAY"

// InstallPath is where the images bake the relay of this version and
// where the container drivers copy it: a Berth-owned path that carries the
// version, so copies of two Berth versions never collide.
func InstallPath(version string) string {
	return InstallDir("/opt/berth", version) + "/" + Name
}

// InstallDir is the directory of the relay of this version under root
// (/opt/berth in the images; a writable tmpfs where /opt cannot be
// written).
func InstallDir(root, version string) string {
	return root + "/relay-" + version
}

// Binary is a relay executable on Berth's side.
type Binary struct {
	Path    string
	Version string
	// Arch is the GOARCH it was built for (amd64, arm64, ...).
	Arch string
}

// Find returns the relay Berth ships: $BERTH_RELAY when set, else
// berth-relay next to Berth's own executable, else berth-relay on PATH.
func Find() (*Binary, error) {
	if p := os.Getenv(EnvPath); p != "" {
		b, err := Open(p)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", EnvPath, p, err)
		}
		return b, nil
	}
	var tried []string
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), Name)
		if _, err := os.Stat(p); err == nil {
			return Open(p)
		}
		tried = append(tried, p)
	}
	if p, err := exec.LookPath(Name); err == nil {
		return Open(p)
	}
	tried = append(tried, "PATH")
	return nil, fmt.Errorf("%s not found (looked in %v): install it next to the orchestrator binary (go build -o DIR/%s ./cmd/berth-relay with CGO_ENABLED=0), or set %s", Name, tried, Name, EnvPath)
}

// Open reads the relay at path: its version, and the architecture of the
// static Linux executable it must be.
func Open(path string) (*Binary, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ef, err := elf.NewFile(f)
	if err != nil {
		return nil, fmt.Errorf("%s is not a Linux executable: %v", path, err)
	}
	arch, ok := goarch[ef.Machine]
	if !ok {
		return nil, fmt.Errorf("%s is built for %s, which Berth does not know", path, ef.Machine)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			return nil, fmt.Errorf("%s is linked dynamically: build it with CGO_ENABLED=0, since a container may have no libc", path)
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	return &Binary{Path: path, Version: hex.EncodeToString(h.Sum(nil))[:16], Arch: arch}, nil
}

var goarch = map[elf.Machine]string{
	elf.EM_X86_64:  "amd64",
	elf.EM_AARCH64: "arm64",
	elf.EM_386:     "386",
	elf.EM_ARM:     "arm",
	elf.EM_PPC64:   "ppc64le",
	elf.EM_S390:    "s390x",
	elf.EM_RISCV:   "riscv64",
}

// Stdin modes of run; wire says what each does.
const (
	StdinRaw     = wire.StdinRaw
	StdinFramed  = wire.StdinFramed // see FrameWriter
	StdinInherit = wire.StdinInherit
)

// RunOptions are run's flags.
type RunOptions struct {
	Grace time.Duration // 0: the relay's default
	Stdin string        // StdinRaw (default), StdinFramed or StdinInherit
	Tag   string        // for Signal; see NewTag
	// Dir and Env (KEY=VALUE, added in order) are the program's working
	// directory and variables, for an exec API that takes neither: the
	// relay sets them itself, so the enclosure needs no shell. A missing
	// Dir ends the run with exit code 126, the reason on stderr.
	Dir string
	Env []string
	// Connect is a unix socket, as the enclosure sees it, that the relay
	// connects to and gives the program as its stdin and stdout (see
	// StdioListener); empty: the relay's own stdio. The relay reads the
	// socket's token as the first line of its stdin (--token-stdin):
	// write StdioListener.TokenLine there before anything else. Never
	// in an environment or on a command line, which every process in the
	// container can read.
	Connect string
	// Hold, when positive, has the relay keep the program for this long
	// when its stdin ends without a signal, waiting for a Berth to come
	// back to HoldSocket (an absolute path as the enclosure sees it);
	// see Handover and Reattach. The program's stdio is then handed over
	// on Connect's socket, or on ConnectFd, a socket the relay inherits
	// (the host), as a Handover; the token line written first on the
	// relay's stdin is also the one a Berth that comes back says. Stdin
	// must be StdinFramed.
	Hold       time.Duration
	HoldSocket string
	ConnectFd  int
}

// RunArgs is the command line that runs prog with args under the relay at
// relayPath.
func RunArgs(relayPath string, o RunOptions, prog string, args ...string) []string {
	argv := []string{relayPath, "run"}
	if o.Grace > 0 {
		argv = append(argv, "--grace", o.Grace.String())
	}
	if o.Stdin != "" {
		argv = append(argv, "--stdin", o.Stdin)
	}
	if o.Tag != "" {
		argv = append(argv, "--tag", o.Tag)
	}
	if o.Dir != "" {
		argv = append(argv, "--dir", o.Dir)
	}
	for _, kv := range o.Env {
		argv = append(argv, "--env", kv)
	}
	if o.Connect != "" {
		argv = append(argv, "--connect", o.Connect)
	}
	if o.ConnectFd > 0 {
		argv = append(argv, "--connect-fd", strconv.Itoa(o.ConnectFd))
	}
	if o.Hold > 0 {
		argv = append(argv, "--hold", o.Hold.String(), "--hold-socket", o.HoldSocket)
	}
	if o.Connect != "" || o.Hold > 0 {
		argv = append(argv, "--token-stdin")
	}
	argv = append(argv, "--", prog)
	return append(argv, args...)
}

// SignalArgs is the command line that sends sig (a name such as TERM, or
// a number) to the relay run with --tag tag, which passes it to its group.
func SignalArgs(relayPath, tag, sig string) []string {
	return []string{relayPath, "signal", "tag=" + tag, sig}
}

// MemArgs is the command line that prints the resident memory, in bytes,
// of everything the relay run with --tag tag runs (its program and what
// that started).
func MemArgs(relayPath, tag string) []string {
	return []string{relayPath, "mem", "tag=" + tag}
}

// DialArgs is the command line that connects the relay's stdio to the
// loopback TCP port. The relay writes wire.ReadyLine to its stderr once
// connected; a refused connection ends it with exit code 1 and the
// reason on stderr.
func DialArgs(relayPath string, port int) []string {
	return []string{relayPath, "dial", "--ready", "127.0.0.1:" + strconv.Itoa(port)}
}

// DialReady reads the stderr of a "dial --ready" to its end. The channel
// it returns gets nil once the relay says it is connected, then, when
// stderr ends, an error made of the other lines (a refused connection's
// reason); it is buffered, so neither send waits for a reader. Reading
// to the end keeps the relay from ever waiting on its stderr.
func DialReady(stderr io.Reader) <-chan error {
	ready := make(chan error, 2)
	go func() {
		sc := bufio.NewScanner(stderr)
		var msg []string
		size, dropped := 0, 0
		for sc.Scan() {
			if sc.Text() == wire.ReadyLine && msg == nil {
				ready <- nil
				msg = []string{}
				continue
			}
			// What explains a refused connection is a line or two: a
			// stderr without end is kept to maxDialMessage (issue 24
			// item 1).
			if size += len(sc.Text()); size > maxDialMessage {
				dropped++
				continue
			}
			msg = append(msg, sc.Text())
		}
		if dropped > 0 {
			msg = append(msg, fmt.Sprintf("(%d more lines not kept)", dropped))
		}
		// A line too long for the scanner stops it: drain the rest.
		_, _ = io.Copy(io.Discard, stderr)
		ready <- errors.New(strings.Join(msg, "; "))
	}()
	return ready
}

// maxDialMessage bounds what DialReady keeps of a dial's stderr.
const maxDialMessage = 4 << 10

// WhichArgs is the command line that prints where name is on PATH; it
// exits 1 when it is not.
func WhichArgs(relayPath, name string) []string {
	return []string{relayPath, "which", name}
}

// VersionArgs is the command line that prints the relay's version.
func VersionArgs(relayPath string) []string {
	return []string{relayPath, "version"}
}

// NewTag returns a tag no other run has: "signal tag=T" must find exactly
// one relay.
func NewTag() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return "berth-" + hex.EncodeToString(b)
}

// ErrClosed is returned by a FrameWriter's Write after Close.
var ErrClosed = errors.New("relay: stdin closed")
