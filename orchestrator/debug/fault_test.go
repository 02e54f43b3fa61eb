package debug

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-dap"
)

// fakeEnv makes the test binary a fake adapter (TestMain), beside the real
// ones, to inject faults they cannot be made to show.
const fakeEnv = "BERTH_FAKE_DAP"

// fakeAdapter answers initialize, then answers launch with a fault: a
// message that is not JSON, or a header announcing one over go-dap's
// limit. Before the fault it sends a custom event and a reverse request,
// which the client must tolerate.
func fakeAdapter(mode string) {
	r := bufio.NewReader(os.Stdin)
	for {
		msg, err := dap.ReadProtocolMessage(r)
		if err != nil {
			return
		}
		switch req := msg.(type) {
		case *dap.InitializeRequest:
			_ = dap.WriteProtocolMessage(os.Stdout, &dap.InitializeResponse{
				Response: dap.Response{ProtocolMessage: dap.ProtocolMessage{Seq: 1, Type: "response"}, RequestSeq: req.Seq, Success: true, Command: "initialize"},
				Body:     dap.Capabilities{SupportsConfigurationDoneRequest: true},
			})
		case *dap.LaunchRequest:
			_ = dap.WriteBaseMessage(os.Stdout, []byte(`{"seq":2,"type":"event","event":"fakeCustom","body":{"x":1}}`))
			_ = dap.WriteBaseMessage(os.Stdout, []byte(`{"seq":3,"type":"request","command":"fakeReverse","arguments":{}}`))
			switch mode {
			case "garbage":
				_ = dap.WriteBaseMessage(os.Stdout, []byte(`{"seq": 4, "type": "event", "event": "out`))
			case "oversized":
				fmt.Fprintf(os.Stdout, "Content-Length: %d\r\n\r\n", 64<<20)
			case "endless-header":
				// A header line that never ends: 256 MiB of it, then
				// silence until it is killed.
				fmt.Fprint(os.Stdout, "Content-Length: ")
				chunk := []byte(strings.Repeat("9", 64<<10))
				for range (256 << 20) / len(chunk) {
					if _, err := os.Stdout.Write(chunk); err != nil {
						return
					}
				}
			}
			time.Sleep(time.Minute) // the client must not wait for this
			return
		}
	}
}

func TestBrokenAdapterEndsSessionCleanly(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ mode, want string }{
		{"garbage", "the adapter sent a message that is not JSON"},
		{"oversized", "the adapter sent a message of 64 MiB (Content-Length 67108864), over the limit of 4 MiB, so Berth stopped reading it and ended the session"},
		// issue 24 item 1: go-dap reads a header to its first '\r' with no
		// limit; before the reader in front of it the launch took 256 MiB
		// and waited for the rest.
		{"endless-header", "the adapter sent a header line with no line end within 4 KiB, so Berth stopped reading it and ended the session"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Setenv(fakeEnv, tc.mode)
			e := newEnv(t, "", func(c *Config) {
				c.Adapters = append(c.Adapters, Adapter{
					ID: "fake", Executables: []string{exe}, Transport: "stdio",
					Markers: []string{"fake.toml"}, Extensions: []string{".fake"}, AdapterID: "fake",
				})
			})
			for _, f := range []string{"fake.toml", "prog.fake"} {
				if err := os.WriteFile(filepath.Join(e.dir, f), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			e.fails(`{"operation":"launch","program":"prog.fake"}`, "launching prog.fake with fake failed", tc.want)
			runtime.ReadMemStats(&after)
			d := time.Since(start)
			t.Logf("%s: the launch allocated %d MiB in %s", tc.mode, (after.TotalAlloc-before.TotalAlloc)>>20, d.Round(time.Millisecond))
			if d > 10*time.Second {
				t.Fatalf("the broken adapter held the launch for %s", d)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > 32<<20 {
				t.Errorf("the launch allocated %d MiB: want under 32 MiB", n>>20)
			}
			e.ok(`{"operation":"status"}`, "no debug session is running", "the last one (fake, prog.fake) ended: ", tc.want)
			noProcess(t, e.dir)
		})
	}
}

// TestFrozenAdapterStillEnds: an adapter that answers nothing (stopped
// with SIGSTOP) is killed after the disconnect's bound, and its debuggee,
// which debugpy puts in a process group of its own, dies with it.
func TestFrozenAdapterStillEnds(t *testing.T) {
	e := newEnv(t, "python", quickStops)
	e.ok(`{"operation":"launch","program":"serve.py"}`, stillRunning)
	e.p.mu.Lock()
	s := e.p.convs["conv-1"].sess
	e.p.mu.Unlock()
	if err := syscall.Kill(s.link.proc.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	e.ok(`{"operation":"terminate"}`, "terminated serve.py")
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("terminate took %s", d)
	}
	noProcess(t, e.dir)
}
