package e2e

import (
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/procfs"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// A kill -9 of Berth leaves nothing a run started on the host, its
// grandchildren included: every process runs under the relay, which ends
// its whole tree when Berth dies (a parent-death signal alone reaches
// only Berth's direct child) (issue 13 item 3).
func TestHostGrandchildrenDieWithBerth(t *testing.T) {
	marker := strconv.Itoa(700000 + os.Getpid()%100000)
	sleeping := func() []procfs.Process {
		return procfs.Filter(func(p procfs.Process) bool { return p.Live() && p.Cmdline() == "sleep "+marker })
	}
	t.Cleanup(func() {
		for _, p := range sleeping() {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
	})
	cmd := command([]string{testTools}, "serve", "--stdio")
	c, err := rpc.DialCommand(cmd, rpc.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	run := newRun(t, c, "", nil)
	called := make(chan struct{})
	go func() {
		defer close(called)
		// The grandchild: sh's background sleep. The call ends with
		// the connection.
		_, _ = c.CallTool(testCtx(t), run, orchestrator.SurfaceFull, "test_exec", map[string]any{"argv": []string{"sh", "-c", "sleep " + marker + " & wait"}})
	}()
	for deadline := time.Now().Add(30 * time.Second); len(sleeping()) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the grandchild did not start")
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	<-called
	for deadline := time.Now().Add(5 * time.Second); len(sleeping()) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("processes outlived a kill -9 of Berth: %v", procfs.Strings(sleeping()))
		}
	}
}
