package mounts

import (
	"errors"
	"strings"
	"testing"

	"github.com/berth-dev/berth/enclosure"
)

// Issue 13 item 4.
func TestLongestPrefixWinsBothWays(t *testing.T) {
	tab := Table{
		{Source: "/home/u/src", Destination: "/workspace"},
		{Source: "/home/u/src/vendor", Destination: "/deps"},
		{Source: "/var/lib/docker/volumes/cache/_data", Destination: "/workspace/.cache"},
		{Source: "/", Destination: "/host"},
	}
	for _, c := range []struct{ out, in string }{
		{"/home/u/src", "/workspace"},
		{"/home/u/src/a/b.go", "/workspace/a/b.go"},
		{"/home/u/src/vendor/x.go", "/deps/x.go"},
		{"/var/lib/docker/volumes/cache/_data/f", "/workspace/.cache/f"},
		{"/etc/passwd", "/host/etc/passwd"},
	} {
		in, err := tab.Inside(c.out)
		if err != nil || in != c.in {
			t.Errorf("Inside(%s) = %s, %v; want %s", c.out, in, err, c.in)
		}
		out, err := tab.Outside(c.in)
		if err != nil || out != c.out {
			t.Errorf("Outside(%s) = %s, %v; want %s", c.in, out, err, c.out)
		}
	}
	// A sibling whose name only starts like a mount is not under it.
	if in, err := tab.Inside("/home/u/srcfoo/x"); err != nil || in != "/host/home/u/srcfoo/x" {
		t.Errorf("Inside(/home/u/srcfoo/x) = %s, %v", in, err)
	}
}

// Issue 13 item 4.
func TestUnmountedPathsAreErrorsNamingTheMounts(t *testing.T) {
	tab := Table{{Source: "/home/u/src", Destination: "/workspace"}, {Destination: "/tmp"}}
	_, err := tab.Inside("/home/u/other")
	if !errors.Is(err, enclosure.ErrNotFound) || !strings.Contains(err.Error(), "/home/u/src -> /workspace, (tmpfs) -> /tmp") {
		t.Fatalf("Inside of an unmounted path: %v", err)
	}
	if _, err := tab.Outside("/etc/hosts"); !errors.Is(err, enclosure.ErrNotFound) {
		t.Fatalf("Outside of a path under no mount: %v", err)
	}
	if _, err := tab.Outside("/tmp/x"); !errors.Is(err, enclosure.ErrNotFound) || !strings.Contains(err.Error(), "tmpfs") {
		t.Fatalf("Outside of a path on a tmpfs: %v", err)
	}
	if _, err := tab.Inside("relative/x"); !errors.Is(err, enclosure.ErrInvalidConfig) {
		t.Fatalf("a relative path: %v", err)
	}
	if _, err := Table(nil).Inside("/x"); err == nil || !strings.Contains(err.Error(), "mounts: none") {
		t.Fatalf("no mounts: %v", err)
	}
}

// A mount beneath another's destination hides what the outer one would
// show there: the path outside is not visible inside through it.
//
// Issue 13 item 4.
func TestAHiddenPathIsNotMapped(t *testing.T) {
	tab := Table{
		{Source: "/src", Destination: "/workspace"},
		{Destination: "/workspace/tmp"},
		{Source: "/elsewhere", Destination: "/workspace/gen"},
		{Source: "/src/gen", Destination: "/gen"},
	}
	if _, err := tab.Inside("/src/tmp/x"); !errors.Is(err, enclosure.ErrNotFound) || !strings.Contains(err.Error(), "hidden by the mount at /workspace/tmp") {
		t.Fatalf("a path under a tmpfs: %v", err)
	}
	// /src/gen is hidden at /workspace/gen but seen at /gen.
	if in, err := tab.Inside("/src/gen/a"); err != nil || in != "/gen/a" {
		t.Fatalf("Inside(/src/gen/a) = %s, %v", in, err)
	}
	if out, err := tab.Outside("/workspace/gen/a"); err != nil || out != "/elsewhere/a" {
		t.Fatalf("Outside(/workspace/gen/a) = %s, %v", out, err)
	}
}

// Berth in a container sees the workdir at /srv/work, the host at
// /data/work, the conversation's container at /workspace: a Crossing
// goes through both tables, both ways, and its errors say which side
// lacks the path and how to mount it.
//
// Issue 13 item 4.
func TestCrossingThroughBerthsOwnMounts(t *testing.T) {
	c := Crossing{
		Self:      Table{{Source: "/data", Destination: "/srv"}},
		Container: Table{{Source: "/data/work", Destination: "/workspace"}},
		Name:      "docker container web",
		Mount:     "docker run -v %s:/workspace ...",
	}
	in, err := c.Inside("/srv/work/a.go")
	if err != nil || in != "/workspace/a.go" {
		t.Fatalf("Inside = %s, %v", in, err)
	}
	out, err := c.Outside("/workspace/a.go")
	if err != nil || out != "/srv/work/a.go" {
		t.Fatalf("Outside = %s, %v", out, err)
	}
	if _, err := c.Inside("/elsewhere/x"); err == nil || !strings.Contains(err.Error(), "has no host path through Berth's own mounts") {
		t.Errorf("a path Berth's mounts do not reach: %v", err)
	}
	if _, err := c.Inside("/srv/other/x"); err == nil || !strings.Contains(err.Error(), "is not mounted into docker container web") || !strings.Contains(err.Error(), "docker run -v /data/other/x:/workspace") {
		t.Errorf("a path the container does not mount: %v", err)
	}
	c.Self = nil
	if out, err := c.Outside("/workspace/a.go"); err != nil || out != "/data/work/a.go" {
		t.Errorf("Outside without Berth's own mounts = %s, %v", out, err)
	}
}

// A path on a read-only mount is not writable, named with the mount; a
// read-write mount beneath it (or the one that shows the path) is; a path
// crossing Berth's own mounts first is judged by the container's mount of
// its host path (issue 24 item 5).
func TestWritableRefusesReadOnlyMounts(t *testing.T) {
	c := Crossing{Name: "docker container web", Container: Table{
		{Source: "/host/wd", Destination: "/workspace", ReadOnly: true},
		{Source: "/host/wd/out", Destination: "/workspace/out"},
	}}
	if err := c.Writable("/host/wd/main.go"); !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), "/workspace/main.go") || !strings.Contains(err.Error(), "/workspace/main.go is on a read-only mount of docker container web at /workspace") {
		t.Errorf("Writable(on the read-only mount) = %v, want ErrReadOnly naming the path inside and the mount", err)
	}
	if err := c.Writable("/host/wd/out/x"); err != nil {
		t.Errorf("Writable(on the read-write mount beneath) = %v, want nil", err)
	}
	if err := c.Writable("/elsewhere/x"); err != nil {
		t.Errorf("Writable(not mounted) = %v, want nil (MapPath's error, not this one's)", err)
	}
	c.Self = Table{{Source: "/host/wd", Destination: "/berth/wd"}}
	if err := c.Writable("/berth/wd/main.go"); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Writable(through Berth's own mount) = %v, want ErrReadOnly", err)
	}
	if got := c.Container.String(); !strings.Contains(got, "/host/wd -> /workspace (read-only)") {
		t.Errorf("String() = %q, want the read-only mount marked", got)
	}
}
