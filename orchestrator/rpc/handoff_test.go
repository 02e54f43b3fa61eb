package rpc

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A handoff refuses every new request with the retryable restarting
// error (-32007), waits for a call in flight that ends within its bound
// and answers it, and cuts off one that does not: a write's result is
// then unknown (outcome_unknown, -32008).
//
// Issue 29 item 4.
func TestHandOffAnswersWhatEndsInTimeAndCutsTheRest(t *testing.T) {
	gate := make(chan struct{})
	s, puts, _ := countServer(t, nil, nil, gate)
	c := connect(t, s)
	ctx := context.Background()
	run := startRun(t, c)
	inFlight := make(chan error, 1)
	go func() {
		_, err := c.CallToolWithID(ctx, "slow", run.RunID, "", "put", map[string]int{})
		inFlight <- err
	}()
	for puts.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	handedOff := make(chan int, 1)
	go func() { handedOff <- s.HandOff(2 * time.Second) }()
	for !s.HandingOff() {
		time.Sleep(time.Millisecond)
	}
	_, err := c.CallTool(ctx, run.RunID, "", "look", map[string]int{})
	if e, ok := err.(*Error); !ok || e.Code != CodeRestarting || !strings.Contains(e.Message, "handing off") {
		t.Fatalf("a call during the handoff: %v, want -32007 restarting", err)
	}
	close(gate) // the call in flight ends within the bound
	if err := <-inFlight; err != nil {
		t.Fatalf("the call in flight: %v, want its answer", err)
	}
	if n := <-handedOff; n != 0 {
		t.Fatalf("%d calls cut off, want none", n)
	}

	// A second server whose call does not end within the bound.
	s2, puts2, _ := countServer(t, nil, nil, make(chan struct{}))
	c2 := connect(t, s2)
	run2 := startRun(t, c2)
	go func() {
		_, err := c2.CallToolWithID(ctx, "stuck", run2.RunID, "", "put", map[string]int{})
		inFlight <- err
	}()
	for puts2.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	if n := s2.HandOff(200 * time.Millisecond); n != 1 {
		t.Fatalf("%d calls cut off, want 1", n)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("the handoff took %v with a bound of 200ms", took)
	}
	err = <-inFlight
	if e, ok := err.(*Error); !ok || e.Code != CodeOutcomeUnknown || !strings.Contains(e.Message, "result is unknown") {
		t.Fatalf("a write cut off: %v, want -32008 outcome_unknown", err)
	}
}
