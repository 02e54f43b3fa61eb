package errclass

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

var errPaused = Kind("paused", ErrUnavailable)

// Every class survives %w through layers, and Of finds it again.
func TestOfFindsTheClassThroughWrapping(t *testing.T) {
	for c, s := range map[Class]error{Invalid: ErrInvalid, NotFound: ErrNotFound, Gone: ErrGone, Unavailable: ErrUnavailable,
		Conflict: ErrConflict, Permission: ErrPermission, Timeout: ErrTimeout, Canceled: ErrCanceled,
		Restarting: ErrRestarting, OutcomeUnknown: ErrOutcomeUnknown} {
		err := fmt.Errorf("tool: %w", fmt.Errorf("driver: %w", s))
		if got := Of(err); got != c {
			t.Errorf("Of(%v) = %q, want %q", err, got, c)
		}
	}
	for _, tc := range []struct {
		err  error
		want Class
	}{
		{nil, ""},
		{errors.New("plain"), ""},
		{fmt.Errorf("call: %w", context.Canceled), Canceled},
		{fmt.Errorf("call: %w", context.DeadlineExceeded), Timeout},
		{fmt.Errorf("container x is paused: %w", errPaused), Unavailable},
		// The outermost class wins: a layer that knows better re-classes.
		{fmt.Errorf("workdir not mounted: %w", fmt.Errorf("%w: %w", ErrInvalid, ErrNotFound)), Invalid},
		{errors.Join(errors.New("a"), fmt.Errorf("b: %w", ErrConflict)), Conflict},
	} {
		if got := Of(tc.err); got != tc.want {
			t.Errorf("Of(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// A narrower class is also its broader one; a kind is its class.
func TestIsHelpersHoldForNarrowerClasses(t *testing.T) {
	gone := fmt.Errorf("container removed: %w", ErrGone)
	if !IsGone(gone) || !IsNotFound(gone) || IsUnavailable(gone) {
		t.Errorf("gone: IsGone %v IsNotFound %v IsUnavailable %v", IsGone(gone), IsNotFound(gone), IsUnavailable(gone))
	}
	if IsGone(fmt.Errorf("x: %w", ErrNotFound)) {
		t.Error("a plain not found is gone")
	}
	paused := fmt.Errorf("x: %w", errPaused)
	if !IsUnavailable(paused) || !errors.Is(paused, errPaused) || errors.Is(fmt.Errorf("x: %w", ErrUnavailable), errPaused) {
		t.Error("paused is not unavailable, or unavailable is paused")
	}
	if !IsTimeout(context.DeadlineExceeded) || !IsCanceled(context.Canceled) {
		t.Error("the context's errors are not timeout and canceled")
	}
}

// Say drops the words the classes and kinds append, and nothing else.
func TestSayDropsTheClassWords(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("docker container web is paused: unpause it: %w", errPaused), "docker container web is paused: unpause it"},
		{fmt.Errorf("docker container web was removed: start a new run: %w", ErrGone), "docker container web was removed: start a new run"},
		{fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", ErrNotFound)), "outer: inner"},
		{errors.New("the server is not found anywhere"), "the server is not found anywhere"},
		// Only the chain's own class words go: the system's stay.
		{fmt.Errorf("start /x: %w", errors.New("open /x: permission denied")), "start /x: open /x: permission denied"},
		{Reclass(errors.New("open /x: permission denied"), ErrPermission), "open /x: permission denied"},
		{fmt.Errorf("lookup: %w", fmt.Errorf("%w: %w", errors.New("gopls: not found"), ErrGone)), "lookup: gopls: not found"},
		{nil, ""},
	} {
		if got := Say(tc.err); got != tc.want {
			t.Errorf("Say(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// Reclass gives an error another class and keeps its chain and message.
func TestReclassPutsTheNewClassFirstAndKeepsTheChain(t *testing.T) {
	inner := fmt.Errorf("/w is not under any mount: %w", ErrNotFound)
	err := fmt.Errorf("enclosure cannot see the workdir: %w", Reclass(inner, ErrInvalid))
	if Of(err) != Invalid || !IsNotFound(err) || !IsInvalid(err) {
		t.Errorf("Of %q, IsNotFound %v, IsInvalid %v; want invalid, both true", Of(err), IsNotFound(err), IsInvalid(err))
	}
	if want := "enclosure cannot see the workdir: /w is not under any mount"; Say(err) != want {
		t.Errorf("Say = %q, want %q", Say(err), want)
	}
	if Reclass(nil, ErrInvalid) != nil {
		t.Error("Reclass(nil) is not nil")
	}
}

// Every class has its own sentinel, which Of gives back, and its own name.
func TestEveryClassHasItsSentinel(t *testing.T) {
	names := map[string]bool{}
	for _, c := range All {
		s := c.Sentinel()
		if s == nil || Of(s) != c || !Bare(s) {
			t.Errorf("class %q: sentinel %v, Of %q", c, s, Of(s))
		}
		if names[string(c)] {
			t.Errorf("class %q named twice", c)
		}
		names[string(c)] = true
	}
	if Class("teapot").Sentinel() != nil {
		t.Error("a name that is no class has a sentinel")
	}
	if Of(errPaused) != Unavailable || Unavailable.Sentinel() == errPaused {
		t.Error("a kind is not its class, or stands for it")
	}
}

// A Case is of its class, and Say keeps its words: they are the message.
func TestCaseKeepsItsWords(t *testing.T) {
	tooLarge := Case("file too large", ErrInvalid)
	err := fmt.Errorf("read: a.bin is 9 MB: %w", tooLarge)
	if Of(err) != Invalid || !IsInvalid(err) || !errors.Is(err, tooLarge) {
		t.Errorf("Of %q, IsInvalid %v; want invalid", Of(err), IsInvalid(err))
	}
	if Say(err) != err.Error() {
		t.Errorf("Say = %q, want %q", Say(err), err.Error())
	}
}
