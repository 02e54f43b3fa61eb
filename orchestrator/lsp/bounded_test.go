package lsp

import (
	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/orchestrator"
	"runtime"
	"strings"
	"testing"
	"time"
)

// heapDuring runs f and returns how many bytes the process allocated on
// the heap meanwhile.
func heapDuring(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// issue 24 items 1 and 2: a server that writes a header line without end,
// or declares a 1 GiB message, costs Berth a bounded amount of memory: the
// call fails at once with an error that names the server and says what
// it sent, the server is ended, and the next call gets a new one. Before
// the reader in front of jsonrpc2, the first buffered the 256 MiB the
// fake writes (and waited for the rest until the request timeout), the
// second allocated 1 GiB at once.
func TestLSPServerFloodIsCapped(t *testing.T) {
	for _, c := range []struct {
		mode, want string
	}{
		{"endless-header-on-hover", "fakelsp sent a header line with no line end within 4 KiB, so Berth stopped reading it and ended it; it is restarted on the next call"},
		{"endless-header-on-start", "fakelsp did not initialize in .: fakelsp sent a header line with no line end within 4 KiB, so Berth stopped reading it and ended it"},
		{"huge-on-hover", "fakelsp sent a message of 1 GiB (Content-Length 1073741824), over the limit of 64 MiB, so Berth stopped reading it and ended it; it is restarted on the next call; if its answers really are this large, raise lsp.max_message_bytes"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			conf := fakeConfig("-mode", c.mode)
			conf.RequestTimeout = 20 * time.Second
			f := newFixture(t, "fake", conf)
			f.ok(t, map[string]any{"action": "status"})
			var text string
			start := time.Now()
			alloc := heapDuring(func() { text = f.fails(t, fakeHover) })
			took := time.Since(start)
			t.Logf("%s: allocated %d MiB in %s: %s", c.mode, alloc>>20, took.Round(time.Millisecond), text)
			contains(t, text, c.want)
			if alloc > 32<<20 {
				t.Errorf("the call allocated %d MiB: want under 32 MiB", alloc>>20)
			}
			if took > 10*time.Second {
				t.Errorf("the call took %s: it should fail as soon as the server broke the limit", took)
			}
			// Berth serves on: status names what happened, and the next
			// call starts a new server.
			deadline := time.Now().Add(10 * time.Second)
			for st := f.ok(t, map[string]any{"action": "status"}); !strings.Contains(st, "fakelsp sent a "); st = f.ok(t, map[string]any{"action": "status"}) {
				if time.Now().After(deadline) {
					t.Fatalf("status does not say what the server sent:\n%s", st)
				}
				time.Sleep(20 * time.Millisecond)
			}
			contains(t, f.fails(t, fakeHover), c.want)
		})
	}
}

// lsp.max_message_bytes sets the limit, and must be positive.
func TestLSPMaxMessageBytesIsConfigurable(t *testing.T) {
	conf := fakeConfig("-mode", "huge-on-hover")
	conf.MaxMessageBytes = 1 << 20
	f := newFixture(t, "fake", conf)
	contains(t, f.fails(t, fakeHover), "fakelsp sent a message of 1 GiB (Content-Length 1073741824), over the limit of 1 MiB")
	conf.MaxMessageBytes = 0
	if _, err := New(conf, nil); err == nil || !strings.Contains(err.Error(), "lsp.max_message_bytes is 0: give the largest message a server may send, in bytes") {
		t.Errorf("a limit of 0: %v", err)
	}
}

// A server whose connection Berth ended (it broke a limit) is reaped by
// the run's end even when the run ends before the server's watcher got to
// it: once the run has ended its process is gone. The CI run of 4d762b8
// leaked such a fakelsp past the package's tests (the watcher stood down
// for the released slot, and the release passed over a server no longer
// alive). Repeated, since the window is a goroutine's scheduling.
func TestServerBrokenJustBeforeTheRunEndsIsReaped(t *testing.T) {
	for i := range 20 {
		conf := fakeConfig("-mode", []string{"endless-header-on-hover", "huge-on-hover"}[i%2])
		conf.RequestTimeout = 20 * time.Second
		f := newFixture(t, "fake", conf)
		f.fails(t, fakeHover)
		sl := f.p.state(f.run).sv.snapshot()[0]
		f.p.state(f.run).sv.mu.Lock()
		srv := sl.srv
		f.p.state(f.run).sv.mu.Unlock()
		f.run.End(orchestrator.EndStopped)
		select {
		case <-srv.proc.exited:
		default:
			t.Fatalf("round %d: the run has ended and its broken server's process still runs (%s)", i, enclosure.Describe(srv.proc.handle))
		}
	}
}
