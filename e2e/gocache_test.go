package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure/docker/dockertest"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// In a fresh container of berth/full:dev run as a user that is not root
// (65534, whose home, /nonexistent, has no cache of its own), Berth's
// gopls answers references and dlv stops at a breakpoint, and both find
// the standard library in the Go caches the image holds: what they add
// to /var/cache/go is the program's own, a few dozen files, where empty
// caches take thousands (the standard library loaded by gopls, compiled
// by dlv's build with -gcflags='all=-N -l' and CGO_CFLAGS='-O0 -g').
//
// The run's start prebuilds the program (debug.prebuild_max): the
// launch then finds every package compiled.
//
// Issue 28 item 3, and its target for a fresh container's first launch.
func TestContainersGoCachesInTheImageServeAUserThatIsNotRoot(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/hello\n\ngo 1.22\n",
		"main.go": `package main

import (
	"fmt"
	"net/http"
)

func greet(name string) string { return fmt.Sprint("hello ", name, " ", http.StatusOK) }

func main() {
	msg := greet("berth")
	fmt.Println(msg)
}
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil { // t.TempDir is 0700, root's
		t.Fatal(err)
	}
	id := dockertest.Must(t, "run", "-d", "--user", "65534", "--network", "none", "-v", dir+":/workspace",
		"--label", "berth.conversation=e2e-gocache", fullImage, "sleep", "infinity")
	t.Cleanup(func() { _, _ = dockertest.Run("rm", "-f", id) })
	if uid := dockertest.Must(t, "exec", id, "id", "-u"); strings.TrimSpace(uid) != "65534" {
		t.Fatalf("the container runs as %s, want 65534", uid)
	}
	// The image's entries carry the mtime 2100-01-01; what a process
	// adds carries its own.
	added := func() []string {
		out := dockertest.Must(t, "exec", id, "find", "/var/cache/go", "-type", "f", "!", "-newermt", "2099-01-01")
		return strings.Fields(out)
	}
	if a := added(); len(a) != 0 {
		t.Fatalf("a fresh container's Go caches hold %d files newer than the image's: %v", len(a), a)
	}

	c := startFamilies(t, family{config: map[string]any{"debug": map[string]any{"python": "/usr/bin/python3"}}})
	r, err := c.StartRun(testCtx(t), rpc.StartRunParams{Workdir: dir, ConversationID: "e2e-gocache",
		Enclosure: &rpc.EnclosureParam{Driver: "docker", ID: id}})
	if err != nil {
		t.Fatal(err)
	}
	// The run's start prebuilt the program as dlv builds it: its launch
	// compiles nothing more.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		st := debugCall(t, c, r.RunID, map[string]any{"operation": "status"})
		if strings.Contains(st, "prebuild (delve, the working directory): done in") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run's prebuild did not finish in 2m:\n%s", st)
		}
	}
	prebuilt := len(added())
	res := callTool(t, c, r.RunID, "lsp", map[string]any{"action": "references", "file": "main.go", "line": 8, "symbol": "greet"})
	if got := text(res); res.IsError || !strings.Contains(got, "main.go:11") {
		t.Fatalf("references of greet, as uid 65534: %s", got)
	}
	debugCall(t, c, r.RunID, map[string]any{"operation": "breakpoints", "file": "main.go", "lines": []int{12}})
	// The build dlv's launch runs would compile nothing: only link.
	out, err := dockertest.Run("exec", "-e", "CGO_CFLAGS=-O0 -g", "-w", "/workspace", id,
		"sh", "-c", "go build -x -gcflags='all=-N -l' -o /tmp/prebuilt-check . 2>&1")
	if err != nil {
		t.Fatalf("go build in the container: %v\n%s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "/compile ") {
			t.Errorf("after the prebuild, dlv's build still compiles: %s", line)
		}
	}
	debugCall(t, c, r.RunID, map[string]any{"operation": "launch", "program": "."}, "stopped (breakpoint)")
	t.Logf("the prebuild added %d files to the Go caches", prebuilt)
	debugCall(t, c, r.RunID, map[string]any{"operation": "terminate"})
	if err := c.StopRun(testCtx(t), r.RunID); err != nil {
		t.Fatal(err)
	}

	a := added()
	var gopls, build int
	for _, f := range a {
		switch {
		case strings.HasPrefix(f, "/var/cache/go/gopls/"):
			gopls++
		case strings.HasPrefix(f, "/var/cache/go/build/"):
			build++
		}
	}
	t.Logf("gopls and dlv's build added %d files to gopls's cache and %d to Go's build cache", gopls, build)
	// A program of its own takes a few dozen files in gopls's cache and a
	// dozen in Go's; the standard library takes thousands in each, and
	// its cgo packages alone about fifty in Go's (they missed while the
	// image compiled them without the CGO_CFLAGS dlv sets).
	if gopls > 100 {
		t.Errorf("gopls added %d files to its cache, more than a program of its own takes: the standard library was not found in the image's cache", gopls)
	}
	if build > 30 {
		t.Errorf("dlv's build added %d files to Go's build cache, more than a program of its own takes: some of the standard library was compiled again (built with other flags or environment than dlv's?)", build)
	}
}
