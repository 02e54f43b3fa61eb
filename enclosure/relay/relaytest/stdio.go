package relaytest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-dev/berth/enclosure"
)

// StdioKinds starts, in dir of enc, a program that prints what its stdin
// and stdout are ("socket" or "pipe") and its user id, then echoes its
// stdin, and returns the kinds and the echo: how a container driver
// carried that start's stdio.
func StdioKinds(t *testing.T, enc enclosure.Enclosure, dir string) (kinds, echo string) {
	t.Helper()
	p, err := enc.Start(context.Background(), enclosure.Cmd{Path: "sh", Dir: dir, Stderr: io.Discard,
		Args: []string{"-c", `for fd in 0 1; do k=$(readlink /proc/$$/fd/$fd); printf '%s ' "${k%%:*}"; done; id -u; cat`}})
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(p.Stdout())
	kinds, _ = r.ReadString('\n')
	io.WriteString(p.Stdin(), "echoed")
	p.Stdin().Close()
	rest, _ := io.ReadAll(r)
	if code, err := p.Wait(); code != 0 || err != nil {
		t.Fatalf("exit %d, %v", code, err)
	}
	return strings.TrimSpace(kinds), string(rest)
}

// NoSocketLeft fails the test when a stdio socket's name is still in dir.
func NoSocketLeft(t *testing.T, dir string) {
	t.Helper()
	if matches, _ := filepath.Glob(filepath.Join(dir, ".berth-*")); len(matches) != 0 {
		t.Fatalf("left in the workdir: %v", matches)
	}
}

// FellBack checks a container whose relays cannot reach their socket in
// dir: two starts there both run on the exec's pipes, the container gave
// sockets up (givenUp), and log holds one line saying so that names key,
// the configuration key that skips the attempt.
func FellBack(t *testing.T, enc enclosure.Enclosure, dir string, givenUp func() bool, log fmt.Stringer, key string) {
	t.Helper()
	for i := 0; i < 2; i++ {
		if kinds, echo := StdioKinds(t, enc, dir); kinds != "pipe pipe 0" || echo != "echoed" {
			t.Fatalf("start %d: stdin, stdout and uid %q, echo %q; want the exec's pipes", i, kinds, echo)
		}
	}
	if !givenUp() || strings.Count(log.String(), "could not connect to its stdio socket") != 1 || !strings.Contains(log.String(), key+": exec") {
		t.Fatalf("sockets given up: %v; log %q", givenUp(), log.String())
	}
}
