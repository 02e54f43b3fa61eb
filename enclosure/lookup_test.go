package enclosure

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// fakeDriver stands in for a container engine, to test the table's rules
// (which driver, how many found, engines that do not answer); the drivers
// themselves are tested against real engines in their packages.
type fakeDriver struct {
	name  string
	found map[string][]string // conversation -> ids
	down  bool
}

type fakeEnclosure struct {
	Enclosure
	driver, id string
}

func (e fakeEnclosure) Driver() string { return e.driver }
func (e fakeEnclosure) ID() string     { return e.id }

// fakeHost stands in for the host enclosure (enclosure/host imports this
// package, so its tests cannot use it).
var fakeHost = fakeEnclosure{driver: "host", id: "local"}

func (d fakeDriver) Name() string { return d.name }
func (d fakeDriver) Attach(_ context.Context, id string) (Enclosure, error) {
	if d.down {
		return nil, fmt.Errorf("engine down: %w", ErrUnavailable)
	}
	return fakeEnclosure{driver: d.name, id: id}, nil
}
func (d fakeDriver) Find(_ context.Context, conv string) ([]string, error) {
	if d.down {
		return nil, fmt.Errorf("engine down: %w", ErrUnavailable)
	}
	return d.found[conv], nil
}

func TestLookupNeverFallsBackSilently(t *testing.T) {
	l := &Lookup{Host: fakeHost, Drivers: map[string]Driver{
		"docker":     fakeDriver{name: "docker", found: map[string][]string{"one": {"c1"}, "two": {"c1", "c2"}}},
		"containerd": fakeDriver{name: "containerd", down: true},
	}, Auto: []string{"containerd", "docker"}}
	for _, tc := range []struct {
		spec Spec
		conv string
		want string
	}{
		{Spec{Driver: "nope"}, "c", `unknown enclosure driver "nope": use one of "host", "auto", "containerd", "docker"`},
		{Spec{Driver: "host", ID: "other"}, "c", `host enclosure has no id "other"`},
		{Spec{Driver: "docker"}, "c", `driver "docker" needs an id`},
		{Spec{Driver: "auto", ID: "x"}, "c", `"auto" takes no id`},
		{Spec{Driver: "auto"}, "two", `2 running containers are labelled berth.conversation=two (docker:c1, docker:c2)`},
	} {
		if _, err := l.Find(context.Background(), tc.spec, tc.conv); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Find(%+v, %q) = %v, want an error containing %q", tc.spec, tc.conv, err, tc.want)
		}
	}
	for _, tc := range []struct {
		spec       Spec
		conv       string
		driver, id string
	}{
		{Spec{}, "c", "host", "local"},
		{Spec{Driver: "host"}, "c", "host", "local"},
		{Spec{Driver: "auto"}, "none", "host", "local"},
		{Spec{Driver: "auto"}, "one", "docker", "c1"},
		{Spec{Driver: "docker", ID: "named"}, "c", "docker", "named"},
	} {
		e, err := l.Find(context.Background(), tc.spec, tc.conv)
		if err != nil || e.Driver() != tc.driver || e.ID() != tc.id {
			t.Errorf("Find(%+v, %q) = %v, %v; want %s %s", tc.spec, tc.conv, e, err, tc.driver, tc.id)
		}
	}
}

func TestLookupWithoutHostFallbackRefusesNoContainer(t *testing.T) {
	l := &Lookup{Host: fakeHost, NoHostFallback: true, Auto: []string{"docker"},
		Drivers: map[string]Driver{"docker": fakeDriver{name: "docker", down: true}}}
	_, err := l.Find(context.Background(), Spec{Driver: "auto"}, "c")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "tried: docker (did not answer)") || !strings.Contains(err.Error(), "host_fallback is false") {
		t.Fatalf("err = %v", err)
	}
	if _, err := l.Find(context.Background(), Spec{Driver: "auto"}, ""); err == nil || !strings.Contains(err.Error(), `"auto" needs the run's conversationId`) {
		t.Errorf("auto without a conversation = %v: with no host to fall back on it must ask for the id", err)
	}
	for _, s := range []Spec{{}, {Driver: "host"}} {
		if _, err := l.Find(context.Background(), s, "c"); err == nil || !strings.Contains(err.Error(), "the host enclosure is disabled here") {
			t.Errorf("Find(%+v) = %v: the host must be refused too", s, err)
		}
	}
}
