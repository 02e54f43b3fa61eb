package debug

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
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
		{"oversized", "the adapter sent a message over 4 MiB"},
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
			e.fails(`{"operation":"launch","program":"prog.fake"}`, "launching prog.fake with fake failed", tc.want)
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("the broken adapter held the launch for %s", d)
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
	if err := syscall.Kill(s.proc.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	e.ok(`{"operation":"terminate"}`, "terminated serve.py")
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("terminate took %s", d)
	}
	noProcess(t, e.dir)
}
