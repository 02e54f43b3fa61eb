package enclosure_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/berth-dev/berth/enclosure"
)

// fakeProc is a Process whose pid may be unknown, with a relay tag.
type fakeProc struct {
	enclosure.Process
	pid int
	tag string
}

func (p fakeProc) Pid() int    { return p.pid }
func (p fakeProc) Tag() string { return p.tag }

// A process is told apart by its pid where the driver knows it, else by
// its relay's tag (Kubernetes, whose handles report pid 0): lsp status
// never shows "pid 0" (issue 24 item 14).
func TestDescribeNamesAProcessByPidElseByItsRelayTag(t *testing.T) {
	for _, c := range []struct {
		p    enclosure.Process
		want string
	}{
		{fakeProc{pid: 4242, tag: "t1"}, "pid 4242"},
		{fakeProc{tag: "k8s-abc"}, "relay tag k8s-abc"},
		{fakeProc{}, "pid unknown"},
	} {
		if got := enclosure.Describe(c.p); got != c.want {
			t.Errorf("Describe(%+v) = %q, want %q", c.p, got, c.want)
		}
	}
}

// Say drops the class words the sentinels append, which an agent has no
// use for, and keeps the sentence.
func TestSayDropsTheClassWords(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("unpause it and call again: %w", enclosure.ErrPaused), "unpause it and call again"},
		{fmt.Errorf("start it and start a new run: %w", enclosure.ErrGone), "start it and start a new run"},
		{fmt.Errorf("check the engine: %w", enclosure.ErrUnavailable), "check the engine"},
		{errors.New("plain"), "plain"},
	} {
		if got := enclosure.Say(c.err); got != c.want {
			t.Errorf("Say(%v) = %q, want %q", c.err, got, c.want)
		}
		if !enclosure.Down(c.err) && c.want != "plain" {
			t.Errorf("Down(%v) is false", c.err)
		}
	}
}
