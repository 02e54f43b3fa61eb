package docker

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/docker/dockertest"
	"github.com/berth-dev/berth/enclosure/enclosuretest"
	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/enclosure/mounts"
	"github.com/berth-dev/berth/enclosure/relayexec"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

// The workdir mounted at /workspace, and at another path: Berth maps
// through the mounts both ways, and the container's processes see the
// file there.
//
// Issue 13 item 4.
func TestMapPathAndHostPathThroughTheMounts(t *testing.T) {
	wd := enclosuretest.Workdir(t)
	os.MkdirAll(filepath.Join(wd, "pkg"), 0o755)
	os.WriteFile(filepath.Join(wd, "pkg", "a.txt"), []byte("from the host\n"), 0o644)
	d := newDriver(t, Options{})
	for _, dst := range []string{"/workspace", "/src/project"} {
		id := runContainer(t, "", enclosuretest.FullImage, "-v", wd+":"+dst)
		c := attach(t, d, id)
		in, err := c.MapPath(filepath.Join(wd, "pkg", "a.txt"))
		if err != nil || in != dst+"/pkg/a.txt" {
			t.Fatalf("MapPath = %q, %v; want %s/pkg/a.txt", in, err, dst)
		}
		if root, err := c.MapPath(wd); err != nil || root != dst {
			t.Fatalf("MapPath(workdir) = %q, %v", root, err)
		}
		back, err := c.HostPath(in)
		if err != nil || back != filepath.Join(wd, "pkg", "a.txt") {
			t.Fatalf("HostPath(%s) = %q, %v", in, back, err)
		}
		p, err := c.Start(context.Background(), enclosure.Cmd{Path: "cat", Args: []string{"pkg/a.txt"}, Dir: dst})
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(p.Stdout())
		if code, _ := p.Wait(); string(out) != "from the host\n" || code != 0 {
			t.Fatalf("cat in the container: %q, exit %d", out, code)
		}
		// A path outside every mount, either way, is refused with the
		// mounts named.
		other := enclosuretest.Workdir(t)
		_, err = c.MapPath(other)
		if !errors.Is(err, enclosure.ErrNotFound) || !strings.Contains(err.Error(), wd+" -> "+dst) || !strings.Contains(err.Error(), "bind-mount") {
			t.Fatalf("MapPath of an unmounted directory: %v", err)
		}
		if _, err := c.HostPath("/etc/passwd"); !errors.Is(err, enclosure.ErrNotFound) {
			t.Fatalf("HostPath(/etc/passwd): %v", err)
		}
	}
}

// When Berth runs in a container itself, its paths reach the host's
// through its own mounts. Berth's side is played by a real container:
// its own /proc/self files, read inside it, lead the driver to it, and
// its inspected mounts translate.
//
// Issue 13 item 4.
func TestBerthInAContainerThroughItsOwnMounts(t *testing.T) {
	wd := enclosuretest.Workdir(t)
	berth := runContainer(t, "", enclosuretest.BaseImage, "-v", wd+":/berth/checkout")
	mountinfo := dockertest.Must(t, "exec", berth, "cat", "/proc/self/mountinfo")
	cgroup := dockertest.Must(t, "exec", berth, "cat", "/proc/self/cgroup")
	hostname := dockertest.Must(t, "exec", berth, "hostname")
	if got := ownContainerID(mountinfo, cgroup, "not-an-id"); got != berth {
		t.Fatalf("ownContainerID read %q from the container's own files, want %s", got, berth)
	}
	target := runContainer(t, "", enclosuretest.FullImage, "-v", wd+":/workspace")
	d := newDriver(t, Options{})
	d.procSelf = func() (string, string, string) { return mountinfo, cgroup, hostname }
	assertBerthView(t, attach(t, d, target), "/berth/checkout", "Berth's own mounts")

	// With nothing but its hostname (the short id) to go by, Berth finds
	// its container too: the engine resolves the short id.
	d = newDriver(t, Options{})
	d.procSelf = func() (string, string, string) { return "", "0::/\n", hostname }
	assertBerthView(t, attach(t, d, target), "/berth/checkout", "the hostname")
}

// enclosure.path_map does the same where the engine does not know
// Berth's container.
//
// Issue 13 item 4.
func TestBerthInAContainerThroughThePathMap(t *testing.T) {
	wd := enclosuretest.Workdir(t)
	target := runContainer(t, "", enclosuretest.FullImage, "-v", wd+":/workspace")
	d := newDriver(t, Options{Shared: relayexec.Shared{PathMap: mounts.Table{{Source: wd, Destination: "/berth/checkout"}}}})
	d.procSelf = func() (string, string, string) {
		t.Fatal("the path map is configured, yet Berth looked for its own container")
		return "", "", ""
	}
	assertBerthView(t, attach(t, d, target), "/berth/checkout", "path_map")
}

func assertBerthView(t *testing.T, c *container, berthWD, how string) {
	t.Helper()
	in, err := c.MapPath(berthWD + "/main.go")
	if err != nil || in != "/workspace/main.go" {
		t.Fatalf("through %s: MapPath = %q, %v", how, in, err)
	}
	back, err := c.HostPath("/workspace/main.go")
	if err != nil || back != berthWD+"/main.go" {
		t.Fatalf("through %s: HostPath = %q, %v", how, back, err)
	}
	_, err = c.MapPath("/elsewhere/x")
	if !errors.Is(err, enclosure.ErrNotFound) || !strings.Contains(err.Error(), "enclosure.path_map") {
		t.Fatalf("through %s: MapPath of a path Berth has no mount for: %v", how, err)
	}
}

// Issue 13 item 4.
func TestOwnContainerIDFromCgroupOrHostname(t *testing.T) {
	id := strings.Repeat("0123456789abcdef", 4)
	for _, cgroup := range []string{
		"12:pids:/docker/" + id + "\n0::/\n",
		"0::/system.slice/docker-" + id + ".scope\n",
	} {
		if got := ownContainerID("", cgroup, ""); got != id {
			t.Errorf("ownContainerID(%q) = %q", cgroup, got)
		}
	}
	for _, hostname := range []string{"", "vm", "berth-sidecar", "0123456789ab0"} {
		if got := ownContainerID("", "0::/\n", hostname); got != "" {
			t.Errorf("no mountinfo, a private cgroup namespace and hostname %q: %q", hostname, got)
		}
	}
	if got := ownContainerID("", "0::/\n", "0123456789ab"); got != "0123456789ab" {
		t.Errorf("a short id as the hostname: %q", got)
	}
}

// run/start with the Docker driver: a mounted workdir gives a run in the
// container (its result names docker and the container's id); one the
// container does not mount is refused with the mounts found.
//
// Issue 13 item 4.
func TestRunStartRefusesAnUnmountedWorkdir(t *testing.T) {
	wd := enclosuretest.Workdir(t)
	conv := "conv-" + t.Name()
	id := runContainer(t, conv, enclosuretest.FullImage, "-v", wd+":/workspace")
	rs := orchestrator.NewRuns(metrics.NewForTest(), time.Hour, &enclosure.Lookup{Host: host.New(), Drivers: map[string]enclosure.Driver{Name: newDriver(t, Options{})}, Auto: []string{Name}})
	ctx := context.Background()
	run, err := rs.Start(ctx, orchestrator.StartParams{Workdir: wd, ConversationID: conv, Enclosure: enclosure.Spec{Driver: "auto"}})
	if err != nil {
		t.Fatal(err)
	}
	if run.Enclosure.Driver() != "docker" || run.Enclosure.ID() != id {
		t.Fatalf("the run's enclosure is %s %s, want docker %s", run.Enclosure.Driver(), run.Enclosure.ID(), id)
	}
	rs.StopAll()

	other := enclosuretest.Workdir(t)
	_, err = rs.Start(ctx, orchestrator.StartParams{Workdir: other, ConversationID: conv, Enclosure: enclosure.Spec{Driver: Name, ID: id}})
	if !errors.Is(err, orchestrator.ErrInvalid) || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), wd+" -> /workspace") {
		t.Fatalf("run/start with an unmounted workdir: %v", err)
	}
}
