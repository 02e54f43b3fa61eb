package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure/containerd/containerdtest"
	"github.com/berth-dev/berth/orchestrator"
)

// The container suite against containerd (issue 14 item 6), as a smaller
// smoke set than Docker's so that CI stays inside its time: the tool
// families in one berth/full container of the tests' containerd
// (scripts/containerd), made as a harness makes one with ctr run and
// found by "auto"; the leak checks; a task killed mid-call; containerd
// restarted. A missing containerd or image fails them, never skips.

// engineContainerd is place.engine for the tests' containerd.
const engineContainerd = "containerd"

// e2eLabel marks this suite's containerd containers.
const e2eLabel = "e2e"

// containerdSection points the binary at the tests' containerd and lets
// "auto" look there.
var containerdSection = family{name: "containerd", config: map[string]any{
	"containerd": map[string]any{"address": containerdtest.Address(), "namespace": containerdtest.Namespace},
	"enclosure":  map[string]any{"auto": []string{"containerd"}},
}}

// inContainerd is a containerd container of image with the workdir at
// /workspace, named in run/start by its id.
func inContainerd(t *testing.T, image string) place {
	t.Helper()
	if err := containerdtest.Check(); err != nil {
		t.Fatal(err)
	}
	if err := containerdtest.Import(image); err != nil {
		t.Fatal(err)
	}
	return place{image: image, mount: "/workspace", engine: engineContainerd}
}

// startContainerdContainer starts a container as a harness does with ctr
// run (its own network namespace, only loopback) and removes it at
// cleanup.
func startContainerdContainer(t *testing.T, image, dir, mount, conversation string) string {
	t.Helper()
	return containerdtest.Run(t, e2eLabel, conversation, image, "",
		"--mount", "type=bind,src="+dir+",dst="+mount+",options=rbind:rw")
}

// ctrExec is argv run in the container's task with ctr tasks exec (in the
// background with detach).
func ctrExec(id, dir string, detach bool, argv ...string) *exec.Cmd {
	args := []string{"-a", containerdtest.Address(), "-n", containerdtest.Namespace, "tasks", "exec",
		"--exec-id", fmt.Sprintf("e2e-%d", rand.Uint32()), "--cwd", dir}
	if detach {
		args = append(args, "-d")
	}
	return exec.Command("ctr", append(append(args, id), argv...)...)
}

// ctrTop is the task's processes as "PID PPID ARGS" (host pids), as
// dockerTop shows a Docker container's.
func ctrTop(t *testing.T, id string) []string {
	t.Helper()
	var out []string
	for _, pid := range containerdtest.Pids(t, id) {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// The fields after the command's ")": state, ppid, ...
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		cmdline, _ := os.ReadFile("/proc/" + pid + "/cmdline")
		args := strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))
		out = append(out, pid+" "+f[1]+" "+args)
	}
	return out
}

// ctrTaskPid is the host's pid of the task's own process.
func ctrTaskPid(t *testing.T, id string) int {
	t.Helper()
	out, err := containerdtest.Ctr("tasks", "ls")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == id {
			pid, _ := strconv.Atoi(f[1])
			return pid
		}
	}
	t.Fatalf("no task %s in ctr tasks ls:\n%s", id, out)
	return 0
}

// The tool families in one berth/full containerd container found by
// "auto": one binary, a run per family in a part of the tree the
// container mounts, each family's own checks (answers, positions,
// breakpoints, dlv through Dial, kernels' state and tool() re-entry,
// workers), each ending with run/stop leaving no process. Berth creates
// no container: the namespace holds the same containers before and after.
//
// Issue 14 item 6.
func TestContainersContainerdFamilies(t *testing.T) {
	p := inContainerd(t, fullImage)
	p.auto = true
	before, err := containerdtest.Count(e2eLabel)
	if err != nil {
		t.Fatal(err)
	}
	// Registered before the container's removal, so it runs after it.
	t.Cleanup(func() {
		after, err := containerdtest.Count(e2eLabel)
		t.Logf("containers of the suite in containerd: %d before, %d after", before, after)
		if err != nil || after != before {
			t.Errorf("containers of the suite in containerd: %d before, %d after (%v)", before, after, err)
		}
	})
	s := p.fresh(t)
	families := []family{lspGo, structural, debugpy, debugAttach, debugDelve, eval, vibeWorkers()}
	c := startFamilies(t, append(families, containerdSection)...)
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) { f.check(t, c, s.sub(t, f.name)) })
	}
	if during, err := containerdtest.Count(e2eLabel); err != nil || during != before+1 {
		t.Errorf("containers of the suite during the test: %d, want %d (%v)", during, before+1, err)
	}
}

// The container's task killed in the middle of a call: that call ends
// with an error result that says so, later calls of its run too, and a
// run in another container keeps its kernel and its state; run/stop of
// that one leaves no process.
//
// Issue 14 item 6.
func TestContainersContainerdTaskKilledMidCall(t *testing.T) {
	kernels := family{config: map[string]any{"kernels": map[string]any{"python": "/usr/bin/python3"}}}
	stoppedMidCall(t, inContainerd(t, kernelImage), []family{containerdSection, kernels}, func(container string) {
		if _, err := containerdtest.Ctr("tasks", "kill", "-s", "KILL", container); err != nil {
			t.Fatal(err)
		}
	}, "task that is stopped", "task")
}

// containerd restarts: a kernel already running lives on (its stdio are
// FIFOs to the shim, not through containerd) and answers while containerd
// is down; a call that must start a process gets an error result that
// says containerd did not answer; once containerd is back that call
// works, and run/stop leaves no process.
//
// Issue 14 item 6.
func TestContainersContainerdRestart(t *testing.T) {
	s := inContainerd(t, kernelImage).fresh(t)
	c := startFamilies(t, containerdSection, family{config: kernelsSection})
	run := s.start(t, c, nil)
	if res := evalCell(t, c, run, "python", "x = 1\nx"); res.IsError || text(res) != "1" {
		t.Fatalf("x = 1: %s", text(res))
	}
	containerdtest.Restart(t, func() {
		if res := evalCell(t, c, run, "python", "x + 1"); res.IsError || text(res) != "2" {
			t.Errorf("the running kernel while containerd is down: %s", text(res))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		res, err := c.CallTool(ctx, run, orchestrator.SurfaceFull, "eval", map[string]any{"language": "javascript", "code": "1+1", "description": "a new kernel while containerd is down"})
		if err != nil {
			t.Fatalf("a new kernel while containerd is down: a protocol error instead of an error result: %v", err)
		}
		t.Logf("a new kernel while containerd is down: %s", text(res))
		if !res.IsError || !strings.Contains(text(res), "did not answer") {
			t.Errorf("a new kernel while containerd is down: want an error result saying containerd did not answer, got %s", text(res))
		}
	})
	if res := evalCell(t, c, run, "javascript", "1+1"); res.IsError || text(res) != "2" {
		t.Fatalf("a new kernel after containerd came back: %s", text(res))
	}
	if res := evalCell(t, c, run, "python", "x + 2"); res.IsError || text(res) != "3" {
		t.Fatalf("the python kernel after containerd came back: %s", text(res))
	}
	if err := c.StopRun(testCtx(t), run); err != nil {
		t.Fatal(err)
	}
	s.waitNoProcesses(t, "run/stop")
}

// A workdir the containerd container does not mount is refused at
// run/start, by id and by "auto", with an error naming the mounts found.
//
// Issue 14 item 6.
func TestContainersContainerdUnmountedWorkdirRefused(t *testing.T) {
	unmountedWorkdirRefused(t, inContainerd(t, kernelImage).fresh(t), startFamilies(t, containerdSection), "containerd")
}

// The same in containerd (containerd.stdio: socket).
//
// Issue 14 item 6.
func TestContainersContainerdKernelStdioIsHandedOverASocket(t *testing.T) {
	s := inContainerd(t, fullImage).fresh(t)
	stdioSocket.check(t, startFamilies(t, stdioSocket, containerdSection), s)
}
