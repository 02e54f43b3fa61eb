package e2e

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/procfs"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// waitGone fails the test unless pid is gone within d.
func waitGone(t *testing.T, pid int, d time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for procfs.Alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: child %d is still alive after %s", what, pid, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startChild asks test_child for a long-lived child of the run.
func startChild(t *testing.T, c *rpc.Client, run string) int {
	t.Helper()
	res := callTool(t, c, run, "test_child", nil)
	pid, err := strconv.Atoi(text(res))
	if err != nil || res.IsError {
		t.Fatalf("test_child: %+v", res)
	}
	if !procfs.Alive(pid) {
		t.Fatalf("child %d is not running", pid)
	}
	return pid
}

func TestStoppingARunLeavesNoChild(t *testing.T) {
	c := startStdio(t, testTools)
	run := newRun(t, c, "", nil)
	pid := startChild(t, c, run)
	if err := c.StopRun(testCtx(t), run); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid, 10*time.Second, "run/stop")
	if _, err := c.ListTools(testCtx(t), run, orchestrator.SurfaceFull); rpcCode(err) != rpc.CodeUnknownRun {
		t.Errorf("tools/list after run/stop: %v, want unknown run", err)
	}
}

func TestClosingTheConnectionEndsItsRuns(t *testing.T) {
	s := startServe(t, []string{testTools}, "--config", writeConfig(t, "runs:\n  disconnect_grace: 0s\n"))
	c := dial(t, s)
	run := newRun(t, c, "", nil)
	pid := startChild(t, c, run)
	_ = c.Close()
	waitGone(t, pid, 10*time.Second, "connection closed")
}

func TestStdinClosingEndsEveryRun(t *testing.T) {
	cmd := command([]string{testTools}, "serve", "--stdio")
	c, err := rpc.DialCommand(cmd, rpc.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	run := newRun(t, c, "", nil)
	pid := startChild(t, c, run)
	if err := c.Close(); err != nil {
		t.Fatalf("orchestrator exit: %v", err)
	}
	waitGone(t, pid, 10*time.Second, "stdin closed")
}

// A harness that goes away may take the orchestrator's stderr with it
// (a pipe it read): the log lines written while stopping must not kill
// the orchestrator by SIGPIPE before it has ended its runs.
func TestHarnessGoneWithStderrEndsRunsCleanly(t *testing.T) {
	cmd := command([]string{testTools}, "serve", "--stdio")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = w
	c, err := rpc.DialCommand(cmd, rpc.ClientOptions{})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	run := newRun(t, c, "", nil)
	pid := startChild(t, c, run)
	r.Close() // the harness's end of stderr goes first, then stdin
	if err := c.Close(); err != nil {
		t.Fatalf("orchestrator exit: %v (a write to the closed stderr killed it)", err)
	}
	waitGone(t, pid, 10*time.Second, "harness gone")
}

func TestIdleRunsEnd(t *testing.T) {
	c := startStdioArgs(t, []string{testTools}, "serve", "--stdio", "--config",
		writeConfig(t, "runs:\n  idle_timeout: 500ms\n  reaper_interval: 50ms\n"))
	run := newRun(t, c, "", nil)
	pid := startChild(t, c, run)
	waitGone(t, pid, 10*time.Second, "idle timeout")
	if _, err := c.ListTools(testCtx(t), run, orchestrator.SurfaceFull); rpcCode(err) != rpc.CodeUnknownRun {
		t.Errorf("tools/list after the idle timeout: %v, want unknown run", err)
	}
}

// A call in flight keeps its run from going idle.
func TestLongCallKeepsTheRunAlive(t *testing.T) {
	c := startStdioArgs(t, []string{testTools}, "serve", "--stdio", "--config",
		writeConfig(t, "runs:\n  idle_timeout: 300ms\n  reaper_interval: 50ms\n"))
	run := newRun(t, c, "", nil)
	if res := callTool(t, c, run, "test_slow", map[string]float64{"seconds": 1}); res.IsError || text(res) != "slept" {
		t.Fatalf("a call longer than the idle timeout: %+v", res)
	}
}

// run/update switches features; tools/list follows and a call to a tool
// whose feature is off says how to turn it on.
func TestRunUpdateTogglesFeatures(t *testing.T) {
	c := startStdio(t, testTools)
	run := newRun(t, c, "", map[string]bool{orchestrator.FeatureStructural: false})
	if slices.Contains(toolNames(t, c, run, orchestrator.SurfaceFull), "test_echo") {
		t.Fatal("test_echo is listed while its feature is off")
	}
	res := callTool(t, c, run, "test_echo", map[string]string{"text": "x"})
	if !res.IsError || !strings.Contains(text(res), `feature "structural" is off`) {
		t.Errorf("call with the feature off: %+v", res)
	}
	if err := c.UpdateRun(testCtx(t), run, map[string]bool{orchestrator.FeatureStructural: true}); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(toolNames(t, c, run, orchestrator.SurfaceFull), "test_echo") {
		t.Fatal("test_echo is not listed after run/update turned its feature on")
	}
}

// run/start reports the enclosure it chose and refuses a container that
// is not there, or a driver it does not know, never falling back silently.
func TestRunStartEnclosure(t *testing.T) {
	c := startStdio(t)
	dir := t.TempDir()
	for _, enc := range []*rpc.EnclosureParam{nil, {Driver: "host"}, {Driver: "auto"}} {
		r, err := c.StartRun(testCtx(t), rpc.StartRunParams{Workdir: dir, Enclosure: enc})
		if err != nil || r.Enclosure.Driver != "host" {
			t.Errorf("enclosure %+v: %+v, %v", enc, r, err)
		}
	}
	_, err := c.StartRun(testCtx(t), rpc.StartRunParams{Workdir: dir, Enclosure: &rpc.EnclosureParam{Driver: "docker", ID: "abc"}})
	// A container that is not there is gone (-32002), never invalid
	// params (issue 27 item 3).
	if rpcCode(err) != rpc.CodeGone || !strings.Contains(err.Error(), `no docker container "abc"`) {
		t.Errorf("docker: %v", err)
	}
	_, err = c.StartRun(testCtx(t), rpc.StartRunParams{Workdir: dir, Enclosure: &rpc.EnclosureParam{Driver: "lxc", ID: "abc"}})
	if rpcCode(err) != rpc.CodeInvalidParams || !strings.Contains(err.Error(), `unknown enclosure driver "lxc": use one of "host", "auto", "containerd", "docker"`) {
		t.Errorf("lxc: %v", err)
	}
	_, err = c.StartRun(testCtx(t), rpc.StartRunParams{Workdir: dir + "/missing"})
	if rpcCode(err) != rpc.CodeInvalidParams || !strings.Contains(err.Error(), "pass an existing directory") {
		t.Errorf("missing workdir: %v", err)
	}
}

// files/didWrite with the lsp feature off is "unknown", never "clean".
func TestDidWriteWithLSPOffIsUnknown(t *testing.T) {
	c := startStdio(t)
	run := newRun(t, c, "", map[string]bool{orchestrator.FeatureLSP: false})
	rep, err := c.DidWrite(testCtx(t), run, []string{"main.go"})
	if err != nil || rep.State != orchestrator.WriteUnknown || rep.Diagnostics == nil || rep.Text == "" {
		t.Fatalf("got %+v, %v", rep, err)
	}
}

// SIGTERM ends every run (and its children), then the process exits 0.
func TestSigtermEndsEveryRun(t *testing.T) {
	s := startServe(t, []string{testTools})
	c := dial(t, s)
	run := newRun(t, c, "", nil)
	pid := startChild(t, c, run)
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := s.wait(t, 30*time.Second); err != nil {
		t.Errorf("orchestrator did not exit cleanly on SIGTERM: %v", err)
	}
	waitGone(t, pid, 10*time.Second, "SIGTERM")
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the connection is still open after SIGTERM")
	}
}
