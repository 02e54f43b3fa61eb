package lsp

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.lsp.dev/protocol"
)

// said is one diagnostic whose message is text, to tell publishes apart.
func said(text string) []protocol.Diagnostic {
	return []protocol.Diagnostic{{Message: protocol.String(text)}}
}

func saidText(items []protocol.Diagnostic) string {
	if len(items) != 1 {
		return fmt.Sprintf("%d items", len(items))
	}
	return messageText(items[0].Message)
}

// A wait for a synced version is answered only by a publish counted after
// the sync, for that version or a later one, or for none: what the server
// said of an older version, before or after the sync, or of another file,
// is not its answer.
func TestDiagStoreWaitsForTheSyncedVersion(t *testing.T) {
	ds := &diagStore{timeout: time.Millisecond}
	ds.publish("a", 2, said("before the sync"), false)
	after := ds.count()
	ds.publish("a", 1, said("an older version, after the sync"), false)
	ds.publish("b", 2, said("another file"), false)
	if items, ok := ds.wait(context.Background(), "a", after, 2); ok {
		t.Errorf("answered %q before version 2 was published", saidText(items))
	}
	ds.publish("d", 3, said("before the sync"), false)
	if items, ok := ds.wait(context.Background(), "d", ds.count(), 2); ok {
		t.Errorf("answered %q, published before the sync", saidText(items))
	}
	ds.publish("a", 2, said("version 2"), false)
	if items, ok := ds.wait(context.Background(), "a", after, 2); !ok || saidText(items) != "version 2" {
		t.Errorf("wait answered %q %v, want version 2's publish", saidText(items), ok)
	}

	after = ds.count()
	ds.publish("c", -1, said("no version"), false)
	if items, ok := ds.wait(context.Background(), "c", after, 5); !ok || saidText(items) != "no version" {
		t.Errorf("a publish without a version after the sync: %q %v", saidText(items), ok)
	}
	ds.publish("a", 3, said("version 3"), false)
	if items, ok := ds.wait(context.Background(), "a", after, 2); !ok || saidText(items) != "version 3" {
		t.Errorf("a later version answers an earlier one: %q %v", saidText(items), ok)
	}
}

// Many files published and waited for at once: every wait gets a publish
// of its version or a later one, and readers of the store run beside
// them (the race detector checks the locking).
func TestDiagStoreConcurrentPublishAndWait(t *testing.T) {
	const files, versions = 8, 40
	ds := &diagStore{timeout: time.Hour}
	after := ds.count()
	var wg sync.WaitGroup
	errs := make(chan error, files*versions)
	for f := range files {
		abs := fmt.Sprintf("f%d", f)
		for v := int32(1); v <= versions; v += 7 {
			wg.Go(func() {
				items, ok := ds.wait(context.Background(), abs, after, v)
				var got int32
				if _, err := fmt.Sscanf(saidText(items), "v%d", &got); !ok || err != nil || got < v {
					errs <- fmt.Errorf("%s waiting for version %d got %q (%v)", abs, v, saidText(items), ok)
				}
			})
		}
		wg.Go(func() {
			for v := int32(1); v <= versions; v++ {
				ds.publish(abs, v, said(fmt.Sprintf("v%d", v)), false)
				ds.latest(abs)
			}
		})
	}
	wg.Go(func() {
		for range versions {
			ds.snapshot()
			ds.since(after)
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := ds.count(); n != files*versions {
		t.Errorf("counted %d publishes, want %d", n, files*versions)
	}
}

// A wait ends unanswered when nothing fresh came within the timeout, when
// its context ends and when the server exited; a server that never falls
// quiet still has its fresh answer taken at the timeout. settle ends the
// same ways.
func TestDiagStoreWaitEnds(t *testing.T) {
	ds := &diagStore{timeout: time.Millisecond}
	ds.publish("a", 1, said("old"), false)
	if items, ok := ds.wait(context.Background(), "a", ds.count(), 1); ok || items != nil {
		t.Errorf("nothing fresh: %q %v, want no answer", saidText(items), ok)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	stopped := make(chan struct{})
	close(stopped)
	for name, ds := range map[string]*diagStore{
		"context ended":   {timeout: time.Hour},
		"server exited":   {timeout: time.Hour, stop: stopped},
		"timeout reached": {timeout: time.Millisecond, debounce: time.Hour},
	} {
		c := context.Background()
		if name == "context ended" {
			c = ctx
		}
		if _, ok := ds.wait(c, "a", 0, 1); ok {
			t.Errorf("%s: answered with nothing published", name)
		}
		ds.settle(c) // returns
	}

	noisy := &diagStore{timeout: time.Millisecond, debounce: time.Hour}
	noisy.publish("a", 1, said("fresh"), false)
	if items, ok := noisy.wait(context.Background(), "a", 0, 1); !ok || saidText(items) != "fresh" {
		t.Errorf("fresh but never quiet: %q %v, want the fresh publish", saidText(items), ok)
	}
}

// since lists the files published after a count, snapshot all of them;
// a deleted file's diagnostics are forgotten without counting a publish.
func TestDiagStoreSinceAndForget(t *testing.T) {
	ds := &diagStore{}
	ds.publish("a", 1, said("a"), false)
	mid := ds.count()
	ds.publish("b", 1, said("b"), true)
	since, n := ds.since(mid)
	if len(since) != 1 || since["b"] == nil || !since["b"].outside || n != 2 {
		t.Errorf("since %d: %v, count %d", mid, since, n)
	}
	ds.forget("a")
	if ds.latest("a") != nil {
		t.Error("a forgotten file still has diagnostics")
	}
	snap, n := ds.snapshot()
	if len(snap) != 1 || saidText(snap["b"]) != "b" || n != 2 {
		t.Errorf("snapshot: %v, count %d", snap, n)
	}
}
