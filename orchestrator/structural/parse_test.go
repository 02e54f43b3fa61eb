package structural

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
)

// TestParseKeepsNoHeap is the guard for issue 11 item 7:
// go-tree-sitter's ParseWithOptions kept ~80 B of live heap per parse for
// ever. 20,000 parses, each under its own cancellable context as a search
// makes them, must leave the live heap where it was.
func TestParseKeepsNoHeap(t *testing.T) {
	p, err := newParser(testLangs.byName["go"].lang)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	src := []byte("package p\n\nfunc f(x int) int {\n\ty := x + 1\n\treturn y\n}\n")
	one := func() {
		ctx, cancel := context.WithTimeout(context.Background(), fileParseTimeout)
		defer cancel()
		if _, err := p.parse(ctx, src); err != nil {
			t.Fatal(err)
		}
	}
	for range 200 { // warm up: the runtime's own first allocations
		one()
	}
	before := liveHeap()
	const parses = 20000
	for range parses {
		one()
	}
	after := liveHeap()
	grew := int64(after) - int64(before)
	t.Logf("live heap before %d B, after %d parses %d B: %+d B (%.1f B a parse)", before, parses, after, grew, float64(grew)/parses)
	// Before the fix: ~80 B a parse, 1.6 MB here. Allow a few bytes a
	// parse for the runtime's own noise.
	if grew > 4*parses {
		t.Errorf("the live heap grew %d B over %d parses (%.1f B each): something keeps every parse", grew, parses, float64(grew)/parses)
	}
}

func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestParseCancelled: a parse under an ended context stops with the
// context's error, and the same parser then parses the next source in
// full (the flag is cleared, the stopped parse not resumed).
func TestParseCancelled(t *testing.T) {
	p, err := newParser(testLangs.byName["go"].lang)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	// Large enough that the parse is still running long after the
	// context's callback has set the flag.
	big := []byte("package p\n" + strings.Repeat("func f() { x := []int{1, 2, 3}; _ = x }\n", 200000))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.parse(ctx, big); !errors.Is(err, context.Canceled) {
		t.Fatalf("parse under a cancelled context: err %v, want context.Canceled", err)
	}
	small := []byte("package p\nfunc g() {}\n")
	tr, err := p.parse(context.Background(), small)
	if err != nil {
		t.Fatalf("the parse after a cancelled one: %v", err)
	}
	if tr.errors != 0 || string(tr.src) != string(small) {
		t.Fatalf("the parse after a cancelled one has %d errors", tr.errors)
	}
}
