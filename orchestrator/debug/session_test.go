package debug

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

// quickStops makes launch return soon for a program that never stops.
func quickStops(c *Config) { c.StopWait = 500 * time.Millisecond }

func TestSecondLaunchRefused(t *testing.T) {
	e := newEnv(t, "python", quickStops)
	e.ok(`{"operation":"launch","program":"serve.py"}`, "launched serve.py with debugpy", stillRunning)
	e.fails(`{"operation":"launch","program":"app.py"}`, "already running in this conversation", "debugpy debugging serve.py, started", "ago", "terminate first")
	e.fails(`{"operation":"attach","port":1}`, "already running in this conversation", "serve.py")

	// Another run of the same conversation sees the same session.
	run2 := orchestrator.NewRun("run-2", "conv-1", e.dir, host.New(), nil, nil)
	defer run2.End("test over")
	res, err := e.reg.Call(t.Context(), run2, orchestrator.SurfaceFull, "debug", []byte(`{"operation":"status"}`))
	if err != nil || res.IsError {
		t.Fatalf("status from run-2: %v %v", err, res)
	}
	has(t, res.FirstText(), "debugpy debugging serve.py", "running")

	e.ok(`{"operation":"pause"}`, "stopped (pause)", "serve.py:")
	e.ok(`{"operation":"evaluate","expression":"count > 0"}`, "True")
	e.ok(`{"operation":"continue"}`, stillRunning)
	e.fails(`{"operation":"stack"}`, "the program is running, not stopped: call pause first")
	e.ok(`{"operation":"terminate"}`, "terminated serve.py (debugpy)")
	e.ok(`{"operation":"terminate"}`, "nothing to terminate")
	noProcess(t, e.dir)
	if got := testutil.ToFloat64(e.metrics.SessionEnds.WithLabelValues(metrics.KindDebug, metrics.ReasonStopped)); got != 1 {
		t.Fatalf("stopped ends = %v, want 1", got)
	}
}

func TestTTLEndsSession(t *testing.T) {
	// Long enough for a launch on a loaded machine, short for a test.
	const ttl = 5 * time.Second
	e := newEnv(t, "python", func(c *Config) {
		quickStops(c)
		c.SessionTTL = ttl
	})
	e.ok(`{"operation":"launch","program":"serve.py"}`, "ends by itself in 5s", stillRunning)
	if len(processesIn(e.dir)) == 0 {
		t.Fatal("no adapter or debuggee runs in the working directory after launch")
	}
	for deadline := time.Now().Add(ttl + 10*time.Second); ; time.Sleep(250 * time.Millisecond) {
		if _, last := e.p.current(e.conv()); last == nil {
			if time.Now().After(deadline) {
				t.Fatal("the session outlived its time to live")
			}
			continue
		}
		break
	}
	e.ok(`{"operation":"status"}`, "no debug session is running", "ended: its time to live (5s) passed")
	noProcess(t, e.dir)
	if got := testutil.ToFloat64(e.metrics.SessionEnds.WithLabelValues(metrics.KindDebug, metrics.ReasonTTL)); got != 1 {
		t.Fatalf("berth_session_ends_total{kind=debug,reason=ttl} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(e.metrics.SessionsActive.WithLabelValues(metrics.KindDebug, metrics.DriverHost)); got != 0 {
		t.Fatalf("berth_sessions_active{kind=debug} = %v, want 0", got)
	}
}

func TestRunEndEndsSession(t *testing.T) {
	e := newEnv(t, "python", quickStops)
	e.ok(`{"operation":"launch","program":"serve.py"}`, stillRunning)
	e.run.End("stopped")
	noProcess(t, e.dir)
	if got := testutil.ToFloat64(e.metrics.SessionEnds.WithLabelValues(metrics.KindDebug, metrics.ReasonRunEnded)); got != 1 {
		t.Fatalf("run_ended ends = %v, want 1", got)
	}
	e.p.mu.Lock()
	left := len(e.p.convs)
	e.p.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d conversations kept after their only run ended", left)
	}
}

func TestProgramExitsAtOnce(t *testing.T) {
	e := newEnv(t, "python", nil)
	e.ok(`{"operation":"launch","program":"quick.py","args":["a b","c"]}`, "the session ended: the program ended (exit code 0)")
	e.ok(`{"operation":"output"}`, "done at once ['a b', 'c']")
	e.ok(`{"operation":"launch","program":"quick.py"}`, "the program ended")
	noProcess(t, e.dir)
}

// An uncaught exception stops the program where it was raised (the
// exception breakpoints set in the handshake).
func TestUncaughtExceptionStops(t *testing.T) {
	e := newEnv(t, "python", nil)
	e.ok(`{"operation":"launch","program":"crash.py"}`, "stopped (exception)", "ValueError: invalid literal for int()", "crash.py:2 in parse", "2 | return int(text)")
	e.ok(`{"operation":"continue"}`, "the program ended (exit code 1)")
	e.ok(`{"operation":"output"}`, "stderr:", "ValueError: invalid literal for int()")
}

func TestUnverifiedBreakpoints(t *testing.T) {
	t.Run("delve", func(t *testing.T) {
		e := newEnv(t, "golang", nil)
		e.ok(`{"operation":"breakpoints","file":"main.go","lines":[22]}`)
		e.ok(`{"operation":"launch","program":"main.go"}`, "main.go:22 verified", "stopped (breakpoint)")
		e.ok(`{"operation":"breakpoints","file":"main.go","lines":[13, 23]}`, "main.go:13 unverified: ", "main.go:23 verified", "23 | fmt.Println")
		e.ok(`{"operation":"continue"}`, "main.go:23 in main.main")
		e.ok(`{"operation":"breakpoints","file":"main.go","lines":[]}`, "cleared the breakpoints of main.go")
		e.ok(`{"operation":"continue"}`, "the program ended")
	})
	t.Run("lldb", func(t *testing.T) {
		e := newEnv(t, "c", nil)
		if out, err := exec.Command("gcc", "-g", "-O0", "-o", e.dir+"/prog", e.dir+"/prog.c").CombinedOutput(); err != nil {
			t.Fatalf("gcc: %v\n%s", err, out)
		}
		e.ok(`{"operation":"breakpoints","file":"prog.c","lines":[3, 17]}`)
		e.ok(`{"operation":"launch","program":"prog"}`, "prog.c:3 (moved by the adapter to line 5, the nearest with code) verified",
			"prog.c:17 verified", "stopped (breakpoint)")
		e.ok(`{"operation":"terminate"}`, "terminated prog (lldb)")
		noProcess(t, e.dir)
	})
}

// freePort is a loopback port nobody listens on.
func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// listening says whether a loopback TCP port is in the LISTEN state,
// without connecting (debugpy takes one client only).
func listening(port int) bool {
	data, _ := os.ReadFile("/proc/net/tcp")
	return strings.Contains(string(data), fmt.Sprintf(":%04X 00000000:0000 0A", port))
}

func TestAttach(t *testing.T) {
	e := newEnv(t, "python", nil)
	port := freePort(t)
	cmd := exec.Command(debianPython, "-m", "debugpy", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--wait-for-client", "serve.py")
	cmd.Dir = e.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	for deadline := time.Now().Add(10 * time.Second); !listening(port); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("debugpy did not listen on %d", port)
		}
	}
	e.ok(`{"operation":"breakpoints","file":"serve.py","lines":[5]}`)
	e.ok(fmt.Sprintf(`{"operation":"attach","port":%d}`, port), fmt.Sprintf("attached to the debugpy on port %d", port), "serve.py:5 verified")
	e.ok(`{"operation":"pause"}`, "serve.py:5", "5 | count += 1")
	e.ok(`{"operation":"evaluate","expression":"count >= 0"}`, "True")
	e.ok(`{"operation":"breakpoints","file":"serve.py","lines":[]}`, "cleared")
	e.ok(`{"operation":"terminate"}`, "detached from the program on port", "keeps running")
	if err := syscall.Kill(cmd.Process.Pid, 0); err != nil {
		t.Fatalf("the debuggee did not survive the detach: %v", err)
	}
}

func TestAttachNothingListening(t *testing.T) {
	e := newEnv(t, "python", nil)
	e.fails(fmt.Sprintf(`{"operation":"attach","port":%d}`, freePort(t)), "nothing accepts connections on port", "--wait-for-client")
}

// Operations on a conversation's session are serialised, across runs too:
// a status from another run of the conversation waits for a continue that
// is still waiting for the program to stop.
func TestOperationsSerialised(t *testing.T) {
	e := newEnv(t, "python", func(c *Config) { c.StopWait = 2 * time.Second })
	e.ok(`{"operation":"launch","program":"serve.py"}`, stillRunning)
	e.ok(`{"operation":"pause"}`, "stopped (pause)")
	s, _ := e.p.current(e.conv())

	type answer struct {
		res *orchestrator.Result
		err error
		at  time.Time
	}
	cont := make(chan answer, 1)
	contStart := time.Now()
	go func() {
		res, err := e.reg.Call(t.Context(), e.run, orchestrator.SurfaceFull, "debug", []byte(`{"operation":"continue"}`))
		cont <- answer{res, err, time.Now()}
	}()
	// The continue holds the conversation once it has resumed the program.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := s.state.stopped(); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the continue never resumed the program")
		}
	}
	run2 := orchestrator.NewRun("run-2", "conv-1", e.dir, host.New(), nil, nil)
	defer run2.End("test over")
	res, err := e.reg.Call(t.Context(), run2, orchestrator.SurfaceFull, "debug", []byte(`{"operation":"status"}`))
	statusAt := time.Now()
	c := <-cont
	if err != nil || c.err != nil || res.IsError || c.res.IsError {
		t.Fatalf("status: %v %v; continue: %v %v", err, res, c.err, c.res)
	}
	has(t, c.res.FirstText(), stillRunning)
	has(t, res.FirstText(), "debugpy debugging serve.py", "running")
	// The continue holds the session for the whole stop wait (the program
	// never stops), so the status cannot answer sooner. (Comparing the two
	// calls' return times instead races: both are taken after the lock is
	// released.)
	if waited := statusAt.Sub(contStart); waited < 2*time.Second-100*time.Millisecond {
		t.Fatalf("status from run-2 answered %s after the continue started, before its 2s stop wait ended (continue returned at +%s)", waited, c.at.Sub(contStart))
	}
	e.ok(`{"operation":"terminate"}`)
	noProcess(t, e.dir)
}

// A call that joins its conversation after the run ended (it raced the
// end) does not keep the conversation's entry alive.
func TestJoinAfterRunEnd(t *testing.T) {
	p, err := New(DefaultConfig(), metrics.NewForTest())
	if err != nil {
		t.Fatal(err)
	}
	run := orchestrator.NewRun("r", "conv-late", t.TempDir(), host.New(), nil, nil)
	run.End("test over")
	if _, err := p.join(run); err == nil {
		t.Fatal("join on an ended run succeeded")
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		p.mu.Lock()
		left := len(p.convs)
		p.mu.Unlock()
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d conversations kept after a join on an ended run", left)
		}
	}
}

// A debug session Berth does not keep ends with the Berth that ran it:
// in the run resumed by the Berth that came next, the conversation's
// debug calls say that a session from before the restart that Berth
// does not keep ended with it, with the breakpoints stored while no
// session ran, and to launch again, until a session runs there; then
// they speak of that one.
//
// Issue 29 item 3 (a debug session and its TTL).
func TestDebugSessionFromBeforeARestartIsDeclaredLost(t *testing.T) {
	before := newEnv(t, "python", quickStops)
	before.ok(`{"operation":"launch","program":"serve.py"}`, "launched serve.py with debugpy", stillRunning)
	before.ok(`{"operation":"terminate"}`, "terminated serve.py (debugpy)") // what Berth's death does

	// The Berth that came next: a provider of its own, and the run
	// resumed there.
	e := newEnv(t, "python", quickStops)
	e.run.Resumed = true
	e.fails(`{"operation":"stack"}`, "no debug session is running in this conversation: "+restartedNote)
	e.ok(`{"operation":"status"}`, "no debug session is running in this conversation: "+restartedNote)
	e.ok(`{"operation":"output"}`, restartedNote)
	e.ok(`{"operation":"terminate"}`, "nothing to terminate. "+restartedNote)
	e.ok(`{"operation":"launch","program":"serve.py"}`, "launched serve.py with debugpy", stillRunning)
	e.ok(`{"operation":"terminate"}`, "terminated serve.py (debugpy)")
	if got := e.ok(`{"operation":"status"}`, "the last one (debugpy, serve.py)"); strings.Contains(got, "Berth restarted") {
		t.Errorf("status after a session ran since the restart still speaks of it: %s", got)
	}
	noProcess(t, e.dir)
}
