package e2e

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure/docker/dockertest"
	"github.com/berth-dev/berth/internal/errclass"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// The end-to-end suite in containers (issue 13 item 8): every tool family
// through the real binary and the protocol, inside containers of the
// images scripts/images builds, made as a harness makes them. Each runs
// the host test's own family (lspGo, debugpy, eval, ...), so the checks
// are the host's. scripts/test runs these as a stage of their own
// (go test -run '^TestContainers' ./e2e/); a missing engine or image
// fails them, never skips.

const (
	lspImage    = "berth/lsp:dev"
	debugImage  = "berth/debug:dev"
	kernelImage = "berth/kernel:dev"
	fullImage   = "berth/full:dev"
)

// Issue 13 item 8.
func TestContainersDockerLSPGo(t *testing.T) { runFamily(t, inContainer(lspImage), lspGo) }

// Issue 13 item 8.
func TestContainersDockerLSPLanguages(t *testing.T) {
	for _, f := range lspLanguages {
		t.Run(f.name, func(t *testing.T) { runFamily(t, inContainer(lspImage), f) })
	}
}

// Issue 13 item 8.
func TestContainersDockerResolveWithGopls(t *testing.T) {
	runFamily(t, inContainer(lspImage), resolveChecks)
}

// Issue 13 item 8.
func TestContainersDockerStructural(t *testing.T) { runFamily(t, inContainer(kernelImage), structural) }

// Issue 13 item 8.
func TestContainersDockerDebugpy(t *testing.T) { runFamily(t, inContainer(debugImage), debugpy) }

// Issue 13 item 8.
func TestContainersDockerDebugAttach(t *testing.T) {
	runFamily(t, inContainer(debugImage), debugAttach)
}

// Issue 13 item 8.
func TestContainersDockerDebugAdapters(t *testing.T) {
	for _, f := range []family{debugDelve, debugLLDB} {
		t.Run(f.name, func(t *testing.T) { runFamily(t, inContainer(debugImage), f) })
	}
}

// Issue 13 item 8.
func TestContainersDockerEval(t *testing.T) { runFamily(t, inContainer(kernelImage), eval) }

// Issue 13 item 8.
func TestContainersDockerVibe(t *testing.T) { runFamily(t, inContainer(kernelImage), vibeWorkers()) }

// Every family in one berth/full container, found by "auto" from its
// conversation label, as a conversation would: one binary, one
// container, a run per family in a part of the tree the container
// mounts. Berth creates no container: the engine holds the same
// containers before and after, and during the test only this one more.
//
// Issue 13 item 8.
func TestContainersDockerEveryFamilyInOneContainer(t *testing.T) {
	before := containers(t)
	t.Cleanup(func() {
		after := containers(t)
		t.Logf("containers on the engine: %d before, %d after", len(before), len(after))
		if !slices.Equal(sorted(before), sorted(after)) {
			t.Errorf("containers before: %v\nafter: %v", before, after)
		}
	})
	p := inContainer(fullImage)
	p.auto = true
	s := p.fresh(t)
	families := append([]family{lspGo}, lspLanguages...)
	families = append(families, resolveChecks, structural, debugpy, debugAttach, debugDelve, debugLLDB, eval, vibeWorkers())
	c := startFamilies(t, families...)
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) { f.check(t, c, s.sub(t, f.name)) })
	}
	during := containers(t)
	t.Logf("containers on the engine during the test: %d (the test's own: %s)", len(during), s.Container[:12])
	if want := append(slices.Clone(before), s.Container); !slices.Equal(sorted(during), sorted(want)) {
		t.Errorf("containers before: %v\nduring: %v\nwant only the test's own %s more", before, during, s.Container)
	}
}

// A kernel's stdin and stdout in a container reach Berth through a
// socket in the workdir (docker.stdio: socket, the default), with no
// engine between: its relay, which holds the kernel should Berth go away
// (enclosure.reattach_grace), connects there and hands Berth the far
// ends of the kernel's pipes. The cell reads its own descriptors (pipes),
// docker top shows the relay connecting there and holding in
// /tmp/.berth-relays, and no socket's name is left in the workdir, each
// removed once its relay connected.
//
// Issue 13 item 8; issue 29 item 2.
func TestContainersDockerKernelStdioIsHandedOverASocket(t *testing.T) {
	runFamily(t, inContainer(kernelImage), stdioSocket)
}

var stdioSocket = family{name: "stdio socket", config: kernelsSection, check: func(t *testing.T, c *rpc.Client, s *site) {
	run := s.start(t, c, nil)
	// The kernel keeps its protocol's descriptors away from a cell's
	// 0 and 1: they are the pipes Berth holds the far ends of.
	res := evalCell(t, c, run, "python", "import os\nsorted({os.readlink('/proc/self/fd/'+fd).split(':')[0] for fd in os.listdir('/proc/self/fd') if os.path.exists('/proc/self/fd/'+fd)})")
	if got := text(res); !strings.Contains(got, "'pipe'") {
		t.Errorf("the kernel's descriptors are %s: none is a pipe", got)
	}
	if top := strings.Join(s.top(t), "\n"); !strings.Contains(top, " --connect "+s.Inside+"/.berth-") || !strings.Contains(top, " --hold-socket /tmp/.berth-relays/berth-") {
		t.Errorf("no relay in the container connects a socket in the workdir and holds in /tmp/.berth-relays:\n%s", top)
	}
	var left []string
	_ = filepath.WalkDir(s.Dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".berth-") {
			left = append(left, path)
		}
		return nil
	})
	if len(left) > 0 {
		t.Errorf("stdio sockets left in the workdir: %v", left)
	}
	if err := c.StopRun(testCtx(t), run); err != nil {
		t.Fatal(err)
	}
}}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// After run/stop, a runs' idle timeout, and a debug session's TTL, docker
// top shows only the container's own process: language server, kernels,
// adapters, debuggees and the relays running them are all gone, but the
// language servers Berth reports parked for the next run (and, after the
// TTL, those of the run that goes on).
//
// Issue 13 item 8.
func TestContainersDockerStopAndTTLLeaveOnlyTheContainersProcess(t *testing.T) {
	s := inContainer(fullImage).fresh(t)
	writeTree(t, s.Dir, debugApp)
	copyProjectInto(t, "go", s.Dir)
	c := startFamilies(t, family{config: map[string]any{
		"kernels": kernelsSection["kernels"],
		// Longer than a launch takes on a loaded machine.
		"debug": map[string]any{"python": "/usr/bin/python3", "session_ttl": "8s", "stop_wait": "2s"},
		// Longer than the session's TTL, so the TTL, not the run's end,
		// ends the session.
		"runs": map[string]any{"idle_timeout": "15s", "reaper_interval": "100ms"},
	}})
	busy := func(run string) {
		t.Helper()
		for _, lang := range []string{"python", "javascript"} {
			if res := evalCell(t, c, run, lang, "1+1"); res.IsError || text(res) != "2" {
				t.Fatalf("%s 1+1: %s", lang, text(res))
			}
		}
		if res := callTool(t, c, run, "lsp", map[string]any{"action": "definition", "file": "main.go", "line": 11, "symbol": "g.Greet"}); res.IsError {
			t.Fatalf("lsp: %s", text(res))
		}
		t.Logf("while the run works, %d processes besides the container's own", len(s.processes(t)))
	}

	run := s.start(t, c, nil)
	busy(run)
	debugCall(t, c, run, map[string]any{"operation": "launch", "program": "serve.py"}, "still running")
	if err := c.StopRun(testCtx(t), run); err != nil {
		t.Fatal(err)
	}
	s.waitNoProcesses(t, "run/stop")

	// The debug session's TTL ends the adapter and its debuggee while
	// the run goes on.
	run = s.start(t, c, nil)
	debugCall(t, c, run, map[string]any{"operation": "launch", "program": "serve.py"}, "still running")
	for deadline := time.Now().Add(30 * time.Second); slices.ContainsFunc(s.processes(t), func(p string) bool { return strings.Contains(p, "serve.py") }); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the debuggee outlived the session's TTL: %v", s.processes(t))
		}
	}
	s.waitOnlyLanguageServers(t, "the debug session's TTL", c, run)

	// The runs' idle timeout ends a run that does nothing.
	busy(run)
	s.waitNoProcesses(t, "the run's idle timeout")
	if _, err := c.ListTools(testCtx(t), run, orchestrator.SurfaceFull); rpcCode(err) != rpc.CodeUnknownRun {
		t.Errorf("tools/list after the idle timeout: %v, want unknown run", err)
	}
}

// A container stopped in the middle of a call: that call ends with an
// error that says so, later calls of its run too, and a run in another
// container keeps its kernel and its state.
//
// Issue 13 item 8.
func TestContainersDockerContainerStoppedMidCall(t *testing.T) {
	kernels := family{config: map[string]any{"kernels": map[string]any{"python": "/usr/bin/python3"}}}
	stoppedMidCall(t, inContainer(kernelImage), []family{kernels}, func(container string) { dockertest.Must(t, "stop", "-t", "1", container) }, "container", "container")
}

// stoppedMidCall runs a long cell in one container of p, stops that
// container (or its task) with stop while the cell prints, through one
// binary configured with sections, and checks
// that the call in flight ends with an error result containing inFlight,
// the run's next call with one containing after, while a run in another
// container of p keeps its kernel and its state, and its run/stop leaves
// no process. The engines' mid-call tests share it.
func stoppedMidCall(t *testing.T, p place, sections []family, stop func(container string), inFlight, after string) {
	t.Helper()
	a, b := p.fresh(t), p.fresh(t)
	c := startFamilies(t, sections...)
	ra, rb := a.start(t, c, nil), b.start(t, c, nil)
	if res := evalCell(t, c, rb, "python", "x = 41\nx"); res.IsError || text(res) != "41" {
		t.Fatalf("the other run's cell: %s", text(res))
	}

	// The cell says it started by a file in the workdir, then prints
	// (the idle budget stays off) until the container stops under it.
	done := make(chan *orchestrator.Result, 1)
	errs := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		res, err := c.CallTool(ctx, ra, orchestrator.SurfaceFull, "eval", map[string]any{
			"code":        "import time\nopen('started', 'w').close()\nfor i in range(1200):\n    print(i, flush=True)\n    time.sleep(0.1)",
			"description": "a long cell the container stops under"})
		done <- res
		errs <- err
	}()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(a.Dir, "started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the long cell did not start")
		}
	}
	stop(a.Container)
	var res *orchestrator.Result
	select {
	case res = <-done:
	case <-time.After(90 * time.Second):
		t.Fatal("the call in flight did not end within 90s of its container stopping")
	}
	if err := <-errs; err != nil {
		t.Fatalf("the call in flight: a protocol error instead of an error result: %v", err)
	}
	t.Logf("the call in flight: %s", text(res))
	if !res.IsError || !strings.Contains(text(res), inFlight) {
		t.Errorf("the call in flight when its container stopped: want an error result containing %q, got %+v", inFlight, res)
	}
	res = evalCell(t, c, ra, "python", "1+1")
	t.Logf("the next call: %s", text(res))
	if !res.IsError || !strings.Contains(text(res), after) {
		t.Errorf("a call after its container stopped: want an error result containing %q, got %+v", after, res)
	}
	if strings.Contains(text(res), "Check the interpreter") {
		t.Errorf("a call after its container stopped sends the user to the interpreter, not the container: %s", text(res))
	}
	if res := evalCell(t, c, rb, "python", "x + 1"); res.IsError || text(res) != "42" {
		t.Errorf("the other run's kernel lost its state or failed: %s", text(res))
	}
	if err := c.StopRun(testCtx(t), rb); err != nil {
		t.Fatal(err)
	}
	b.waitNoProcesses(t, "run/stop")
}

// dockerd restarts (with --live-restore, as scripts/setup starts it): a
// running kernel's cells go on while the engine is down (its stdio and
// its relay's control go over the workdir's socket, held for a restart
// of Berth, not through the engine); a call that needs the engine (a
// kernel's start in another run) ends with an unavailable error that
// says so, within its time; and calls work after the engine is back.
//
// Issue 13 item 8; issue 29 item 2 (the kernel's stdio off the engine).
func TestContainersDockerdRestart(t *testing.T) {
	s := inContainer(kernelImage).fresh(t)
	c := startFamilies(t, family{config: kernelsSection})
	run := s.start(t, c, nil)
	if res := evalCell(t, c, run, "python", "1+1"); res.IsError || text(res) != "2" {
		t.Fatalf("1+1: %s", text(res))
	}
	t.Cleanup(func() { dockerd(t, "start") }) // whatever happens below
	dockerd(t, "stop")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := c.CallTool(ctx, run, orchestrator.SurfaceFull, "eval", map[string]any{"code": "1+1", "description": "a cell while the engine is down"})
	if err != nil {
		t.Fatalf("a cell of the running kernel while the engine is down: a protocol error: %v", err)
	}
	if res.IsError || text(res) != "2" {
		t.Errorf("a cell of the running kernel while the engine is down: %s; want 2 (its stdio does not go through the engine)", text(res))
	}
	other := s.params(nil)
	other.RunID = "run-while-down"
	if _, err := c.StartRun(ctx, other); err != nil {
		t.Logf("run/start while the engine is down: %v", err)
		if rpcCode(err) != rpc.CodeUnavailable {
			t.Errorf("run/start while the engine is down: %v, want unavailable (%d)", err, rpc.CodeUnavailable)
		}
	} else {
		res, err := c.CallTool(ctx, other.RunID, orchestrator.SurfaceFull, "eval", map[string]any{"code": "1+1", "description": "a kernel's start while the engine is down"})
		if err != nil {
			t.Fatalf("a kernel's start while the engine is down: a protocol error instead of an error result: %v", err)
		}
		t.Logf("a kernel's start while the engine is down: %s", text(res))
		if !res.IsError || res.ErrorClass != errclass.Unavailable {
			t.Errorf("a kernel's start while the engine is down: %s (class %q), want an unavailable error result", text(res), res.ErrorClass)
		}
		_ = c.StopRun(testCtx(t), other.RunID)
	}
	dockerd(t, "start")
	if state := dockertest.Must(t, "inspect", "-f", "{{.State.Status}}", s.Container); state != "running" {
		t.Fatalf("the container is %s after the engine restarted: dockerd runs without --live-restore?", state)
	}
	res = evalCell(t, c, run, "python", "1+1")
	if res.IsError || text(res) != "2" {
		t.Fatalf("the call after the engine came back: %s", text(res))
	}
	if err := c.StopRun(testCtx(t), run); err != nil {
		t.Fatal(err)
	}
	s.waitNoProcesses(t, "run/stop")
}

// dockerd runs scripts/dockerd (start, stop), the script scripts/setup
// starts the engine with.
func dockerd(t *testing.T, verb string) {
	t.Helper()
	out, err := exec.Command(filepath.Join("..", "scripts", "dockerd"), verb).CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/dockerd %s: %v\n%s", verb, err, out)
	}
}

// A workdir the container does not mount is refused at run/start, by id
// and by "auto", with an error naming the mounts found.
//
// Issue 13 item 8.
func TestContainersDockerUnmountedWorkdirRefused(t *testing.T) {
	unmountedWorkdirRefused(t, inContainer(kernelImage).fresh(t), startStdio(t), "docker")
}

// unmountedWorkdirRefused starts a run in a workdir s's container does
// not mount, by driver and id and by "auto", and wants invalid params
// (class invalid, issue 27 item 3) naming the workdir and the container's
// mount. The engines' tests share
// it.
func unmountedWorkdirRefused(t *testing.T, s *site, c *rpc.Client, driver string) {
	t.Helper()
	elsewhere := onHost.fresh(t)
	for _, enc := range []*rpc.EnclosureParam{{Driver: driver, ID: s.enclosureID()}, {Driver: "auto"}} {
		_, err := c.StartRun(testCtx(t), rpc.StartRunParams{Workdir: elsewhere.Dir, ConversationID: s.Conversation, Enclosure: enc})
		if rpcCode(err) != rpc.CodeInvalidParams || rpcClass(err) != errclass.Invalid || !strings.Contains(err.Error(), "/workspace") || !strings.Contains(err.Error(), elsewhere.Dir) {
			t.Errorf("run/start %+v in an unmounted workdir: %v (class %q), want invalid params (class invalid) naming the workdir and the mounts", enc, err, rpcClass(err))
		}
	}
}

// The workdir mounted somewhere else than /workspace works the same:
// Berth maps through the container's mounts.
//
// Issue 13 item 8.
func TestContainersDockerWorkdirMountedElsewhere(t *testing.T) {
	p := place{image: fullImage, mount: "/src/project"}
	for _, f := range []family{lspGo, eval, debugpy} {
		t.Run(f.name, func(t *testing.T) { runFamily(t, p, f) })
	}
}
