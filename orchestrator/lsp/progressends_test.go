package lsp

import (
	"testing"
)

// A token's end wakes its waiter; an end of a token no one awaits (the
// server's own progress) or one dropped changes nothing, and each await
// gets a token of its own.
//
// Issue 28: gopls's diagnostics are pulled through a command whose
// progress ends after its publishes.
func TestAProgressEndWakesOnlyItsOwnWaiter(t *testing.T) {
	var p progressEnds
	a, endedA := p.await()
	b, endedB := p.await()
	if a == b {
		t.Fatalf("two awaits got the same token %q", a)
	}
	p.ended("the server's own")
	p.ended(b)
	select {
	case <-endedB:
	default:
		t.Errorf("the end of %q did not wake its waiter", b)
	}
	select {
	case <-endedA:
		t.Errorf("the end of another token woke the waiter of %q", a)
	default:
	}
	p.ended(b) // a second end of the same token: nothing to close twice
	p.drop(a)
	p.ended(a)
	select {
	case <-endedA:
		t.Errorf("a dropped token's end woke its waiter")
	default:
	}
	p.drop(b)
	if len(p.waiting) != 0 {
		t.Errorf("%d waiters left after every token was dropped", len(p.waiting))
	}
}
