package e2e

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure/containerd/containerdtest"
	"github.com/berth-dev/berth/enclosure/docker/dockertest"
	"github.com/berth-dev/berth/internal/errclass"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// A run's container stopped, removed or paused, or its engine silent,
// under every tool family (issue 24 items 11 and 13), on Docker and on
// containerd, through the real binary: each family's call is an error
// result that names the container and says what to do (start it, unpause
// it, check the engine), never "not on the PATH", "not found in the
// enclosure", "context deadline exceeded" or "fix vibe.runners". Calls
// that meet a running process (a kernel, gopls, a debug session) and
// calls that must start one (pyright, a javascript kernel, a worker,
// the debug adapters' detection) are both asked; each error result's
// errorClass is the state's class (gone, or unavailable for a paused
// container and a silent engine: issue 27 item 3). The silent engine is a
// unix socket in front of the real one that, once silenced, accepts and
// never answers: the shared engines are never stopped.

// downProject is a Go module and a Python project side by side.
var downProject = map[string]string{
	"go.mod":         "module example.com/down\n\ngo 1.22\n",
	"main.go":        "package main\n\nimport \"fmt\"\n\nfunc greet() string { return \"hi\" }\n\nfunc main() {\n\tfmt.Println(greet())\n}\n",
	"pyproject.toml": "[project]\nname = \"down\"\nversion = \"0.1\"\n",
	"app.py":         "def main():\n    name = \"berth\"\n    print(\"hello\", name)\n\n\nmain()\n",
}

// downConfig has short waits, so that a call that hangs on a paused
// container ends within the test's time.
var downConfig = family{name: "down", config: map[string]any{
	"kernels": map[string]any{"python": "/usr/bin/python3", "cell_idle_budget": "3s", "interrupt_grace": "2s"},
	"debug":   map[string]any{"python": "/usr/bin/python3", "request_wait": "15s"},
	// No prewarm: the calls that must start a server (pyright) start it
	// after the container changed.
	"lsp": map[string]any{"request_timeout": "20s", "prewarm_max": 0},
	"vibe": map[string]any{"runners": map[string][]string{
		"fast": {"/bin/sh", "-c", "cat >/dev/null; sleep 600"},
		"good": {"/bin/sh", "-c", "cat >/dev/null; sleep 600"},
	}},
}}

// downState is what happens to the container (or its engine), what its
// errors name it by, and what they must say to do.
type downState struct {
	name string
	// apply does it; ref is what the container's errors name it by.
	apply func(t *testing.T, s *site, eng *silentEngine)
	want  []string
	// warmAnswers: the processes already running still answer (a silent
	// engine does not stop a kernel whose stdio is a socket).
	warmAnswers bool
	// class is the errorClass of the error results (issue 27 item 3).
	class errclass.Class
}

var (
	dockerStopped = downState{name: "stopped", want: []string{"docker start"}, class: errclass.Gone,
		apply: func(t *testing.T, s *site, _ *silentEngine) { dockertest.Must(t, "stop", "-t", "1", s.Container) }}
	dockerPaused = downState{name: "paused", want: []string{"paused", "docker unpause"}, class: errclass.Unavailable,
		apply: func(t *testing.T, s *site, _ *silentEngine) {
			dockertest.Must(t, "pause", s.Container)
			t.Cleanup(func() { _, _ = dockertest.Run("unpause", s.Container) })
		}}
	dockerRemoved = downState{name: "removed", want: []string{"no longer exists", "start a new run"}, class: errclass.Gone,
		apply: func(t *testing.T, s *site, _ *silentEngine) { dockertest.Must(t, "rm", "-f", s.Container) }}
	dockerSilent = downState{name: "silent engine", want: []string{"did not answer", "check that the engine runs"}, warmAnswers: true, class: errclass.Unavailable,
		apply: func(t *testing.T, _ *site, eng *silentEngine) { eng.silence() }}

	ctrStopped = downState{name: "stopped", want: []string{"stopped", "task start"}, class: errclass.Gone,
		apply: func(t *testing.T, s *site, _ *silentEngine) {
			if _, err := containerdtest.Ctr("tasks", "kill", "-s", "KILL", s.Container); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				out, _ := containerdtest.Ctr("tasks", "ls")
				if l := lineOf(out, s.Container); l == "" || strings.Contains(l, "STOPPED") {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("the task of %s did not stop:\n%s", s.Container, out)
				}
			}
		}}
	ctrPaused = downState{name: "paused", want: []string{"paused", "task resume"}, class: errclass.Unavailable,
		apply: func(t *testing.T, s *site, _ *silentEngine) {
			if _, err := containerdtest.Ctr("tasks", "pause", s.Container); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = containerdtest.Ctr("tasks", "resume", s.Container) })
		}}
	// A process that ended as its task was deleted may have seen the
	// container without a task first: either says to start a new run.
	ctrRemoved = downState{name: "removed", want: []string{"start a new run"}, class: errclass.Gone,
		apply: func(t *testing.T, s *site, _ *silentEngine) { containerdtest.Remove(t, s.Container) }}
	ctrSilent = downState{name: "silent engine", want: []string{"did not answer", "check that containerd runs"}, warmAnswers: true, class: errclass.Unavailable,
		apply: func(t *testing.T, _ *site, eng *silentEngine) { eng.silence() }}
)

func lineOf(out, id string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, id) {
			return l
		}
	}
	return ""
}

func TestContainersDockerStoppedContainerIsNamedByEveryFamily(t *testing.T) {
	downFamilies(t, inContainer(fullImage), dockerStopped)
}

func TestContainersDockerPausedContainerIsNamedByEveryFamily(t *testing.T) {
	downFamilies(t, inContainer(fullImage), dockerPaused)
}

func TestContainersDockerRemovedContainerIsNamedByEveryFamily(t *testing.T) {
	downFamilies(t, inContainer(fullImage), dockerRemoved)
}

func TestContainersDockerSilentEngineIsNamedByEveryFamily(t *testing.T) {
	downFamilies(t, inContainer(fullImage), dockerSilent)
}

func TestContainersContainerdStoppedTaskIsNamedByEveryFamily(t *testing.T) {
	downFamilies(t, inContainerd(t, fullImage), ctrStopped)
}

func TestContainersContainerdPausedTaskIsNamedByEveryFamily(t *testing.T) {
	downFamilies(t, inContainerd(t, fullImage), ctrPaused)
}

func TestContainersContainerdRemovedContainerIsNamedByEveryFamily(t *testing.T) {
	downFamilies(t, inContainerd(t, fullImage), ctrRemoved)
}

func TestContainersContainerdSilentEngineIsNamedByEveryFamily(t *testing.T) {
	downFamilies(t, inContainerd(t, fullImage), ctrSilent)
}

// downFamilies starts a run in a container of p through an engine proxy,
// warms a kernel, gopls and a debug session stopped at a breakpoint,
// applies st, and asks every family.
func downFamilies(t *testing.T, p place, st downState) {
	s := p.fresh(t)
	writeTree(t, s.Dir, downProject)
	eng := newSilentEngine(t, p.engine)
	c := startFamilies(t, downConfig, eng.section())
	run := s.start(t, c, map[string]bool{"vibe": true})
	ref := s.Container
	if p.engine != engineContainerd {
		ref = strings.TrimPrefix(dockertest.Must(t, "inspect", "-f", "{{.Name}}", s.Container), "/")
	}

	// Warm: a kernel with state, gopls, a debug session at a breakpoint.
	if res := evalCell(t, c, run, "python", "x = 41\nx"); res.IsError || text(res) != "41" {
		t.Fatalf("warming the kernel: %s", text(res))
	}
	gotoGreet := map[string]any{"action": "definition", "file": "main.go", "line": 8, "symbol": "greet"}
	if res := callTool(t, c, run, "lsp", gotoGreet); res.IsError || !strings.Contains(text(res), "main.go:5") {
		t.Fatalf("warming gopls: %s", text(res))
	}
	debugCall(t, c, run, map[string]any{"operation": "breakpoints", "file": "app.py", "lines": []int{3}})
	debugCall(t, c, run, map[string]any{"operation": "launch", "program": "app.py"}, "app.py:3")

	st.apply(t, s, eng)
	t.Logf("the container %s (%s) is now %s", ref, p.driver(), st.name)

	check := func(what string, surface orchestrator.Surface, tool string, args any, isError bool) {
		t.Helper()
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		res, err := c.CallTool(ctx, run, surface, tool, args)
		if err != nil {
			t.Errorf("%s: a protocol error instead of an error result: %v", what, err)
			return
		}
		got := text(res)
		t.Logf("%s (%s):\n%s", what, time.Since(start).Round(time.Millisecond), got)
		if isError && !res.IsError {
			t.Errorf("%s: not an error result: %s", what, got)
		}
		if res.IsError && res.ErrorClass != st.class {
			t.Errorf("%s: errorClass %q, want %q", what, res.ErrorClass, st.class)
		}
		for _, w := range append([]string{ref}, st.want...) {
			if !strings.Contains(got, w) {
				t.Errorf("%s: the answer lacks %q:\n%s", what, w, got)
			}
		}
		for _, wrong := range []string{"not on the PATH", "not found in the", "context deadline exceeded", "fix vibe.runners", "Check the interpreter", "start it (docker start"} {
			if wrong == "start it (docker start" && st.name != "paused" {
				continue
			}
			if strings.Contains(got, wrong) {
				t.Errorf("%s: the answer sends the agent the wrong way (%q):\n%s", what, wrong, got)
			}
		}
	}

	// Processes already running.
	if !st.warmAnswers {
		check("eval in the running kernel", orchestrator.SurfaceFull, "eval", map[string]any{"code": "x + 1", "language": "python", "description": "use the kernel after the container changed"}, true)
		check("lsp to the running gopls", orchestrator.SurfaceFull, "lsp", gotoGreet, true)
		check("debug step in the session", orchestrator.SurfaceFull, "debug", map[string]any{"operation": "step_over"}, true)
	}
	// Processes to start.
	check("lsp to pyright, not started yet", orchestrator.SurfaceFull, "lsp", map[string]any{"action": "definition", "file": "app.py", "line": 6, "symbol": "main"}, true)
	check("lsp_rename in app.py", orchestrator.SurfaceFull, "lsp_rename", map[string]any{"file": "app.py", "line": 1, "symbol": "main", "new_name": "run"}, true)
	check("debug adapters", orchestrator.SurfaceFull, "debug", map[string]any{"operation": "adapters"}, false)
	check("eval in a new javascript kernel", orchestrator.SurfaceFull, "eval", map[string]any{"code": "1+1", "language": "javascript", "description": "start a kernel after the container changed"}, true)
	check("vibe_spawn", orchestrator.SurfacePlan, "vibe_spawn", map[string]any{"brief": "port the parser", "label": "parser"}, true)

	// Cleanup runs with the engine answering again.
	eng.resume()
}

// silentEngine is a unix socket in front of an engine's (Docker's or the
// tests' containerd's): it forwards, until silenced; then it accepts and
// never answers, and connections already open carry nothing more, until
// resumed.
type silentEngine struct {
	engine   string
	path     string
	upstream string
	ln       net.Listener

	mu   sync.Mutex
	gate chan struct{} // closed while forwarding
	done chan struct{}
	wg   sync.WaitGroup
}

func newSilentEngine(t *testing.T, engine string) *silentEngine {
	t.Helper()
	dir, err := os.MkdirTemp("", "berth-eng")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	e := &silentEngine{engine: engine, path: filepath.Join(dir, "engine.sock"), gate: make(chan struct{}), done: make(chan struct{})}
	close(e.gate)
	e.upstream = "/var/run/docker.sock"
	if engine == engineContainerd {
		e.upstream = containerdtest.Address()
	}
	if e.ln, err = net.Listen("unix", e.path); err != nil {
		t.Fatal(err)
	}
	e.wg.Add(1)
	go e.serve()
	t.Cleanup(func() {
		e.resume()
		close(e.done)
		_ = e.ln.Close()
		e.wg.Wait()
	})
	return e
}

// section points the binary at the proxy.
func (e *silentEngine) section() family {
	if e.engine == engineContainerd {
		return family{name: "containerd", config: map[string]any{
			"containerd": map[string]any{"address": e.path, "namespace": containerdtest.Namespace},
		}}
	}
	return family{name: "docker", config: map[string]any{"docker": map[string]any{"host": "unix://" + e.path}}}
}

func (e *silentEngine) silence() {
	e.mu.Lock()
	defer e.mu.Unlock()
	select {
	case <-e.gate:
		e.gate = make(chan struct{})
	default:
	}
}

func (e *silentEngine) resume() {
	e.mu.Lock()
	defer e.mu.Unlock()
	select {
	case <-e.gate:
	default:
		close(e.gate)
	}
}

// pass waits while the engine is silent; false once the proxy closes.
func (e *silentEngine) pass() bool {
	e.mu.Lock()
	g := e.gate
	e.mu.Unlock()
	select {
	case <-g:
		return true
	case <-e.done:
		return false
	}
}

func (e *silentEngine) serve() {
	defer e.wg.Done()
	for {
		conn, err := e.ln.Accept()
		if err != nil {
			return
		}
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			defer conn.Close()
			if !e.pass() {
				return
			}
			up, err := net.Dial("unix", e.upstream)
			if err != nil {
				return
			}
			defer up.Close()
			var both sync.WaitGroup
			both.Add(2)
			go func() { defer both.Done(); e.copy(up, conn); _ = up.Close() }()
			go func() { defer both.Done(); e.copy(conn, up); _ = conn.Close() }()
			go func() { <-e.done; _ = conn.Close(); _ = up.Close() }()
			both.Wait()
		}()
	}
}

// copy forwards src to dst, holding each chunk while the engine is
// silent.
func (e *silentEngine) copy(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !e.pass() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// run/start while the engine does not answer is "unavailable" (-32003),
// not invalid params (issue 24 item 13), and says to check the engine; so
// is a paused container, which also says to unpause it.
func TestContainersRunStartWithEngineDownIsUnavailable(t *testing.T) {
	for _, engine := range []string{"", engineContainerd} {
		name := "docker"
		if engine != "" {
			name = engine
		}
		t.Run(name, func(t *testing.T) {
			p := inContainer(kernelImage)
			if engine == engineContainerd {
				p = inContainerd(t, kernelImage)
			}
			s := p.fresh(t)
			eng := newSilentEngine(t, engine)
			c := startFamilies(t, eng.section())
			eng.silence()
			defer eng.resume()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			_, err := c.StartRun(ctx, s.params(nil))
			t.Logf("run/start with the engine silent: %v", err)
			if rpcCode(err) != rpc.CodeUnavailable || !strings.Contains(err.Error(), "did not answer") || !strings.Contains(err.Error(), "check that") {
				t.Errorf("run/start with the engine silent: %v (code %d), want unavailable (%d) saying to check the engine", err, rpcCode(err), rpc.CodeUnavailable)
			}
			eng.resume()

			if engine == engineContainerd {
				if _, err := containerdtest.Ctr("tasks", "pause", s.Container); err != nil {
					t.Fatal(err)
				}
				defer func() { _, _ = containerdtest.Ctr("tasks", "resume", s.Container) }()
			} else {
				dockertest.Must(t, "pause", s.Container)
				defer func() { _, _ = dockertest.Run("unpause", s.Container) }()
			}
			_, err = c.StartRun(ctx, s.params(nil))
			t.Logf("run/start in a paused container: %v", err)
			if rpcCode(err) != rpc.CodeUnavailable || !strings.Contains(err.Error(), "unpause") {
				t.Errorf("run/start in a paused container: %v (code %d), want unavailable (%d) saying to unpause it", err, rpcCode(err), rpc.CodeUnavailable)
			}
		})
	}
}

// A container where the engine starts no exec at all (its working
// directory deleted and re-created under its bind mount): run/start's
// relay installation fails with the engine's own reason, not a list of
// "exit 126" and a guess at "a mount over /opt/berth?" (issue 24 item 12).
func TestContainersRelayInstallCarriesTheEnginesReason(t *testing.T) {
	dir := t.TempDir()
	id := dockertest.Must(t, "run", "-d", "--network", "none", "-w", "/workspace", "-v", dir+":/workspace", kernelImage, "sleep", "infinity")
	t.Cleanup(func() { _, _ = dockertest.Run("rm", "-f", id) })
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := startStdio(t)
	_, err := c.StartRun(testCtx(t), rpc.StartRunParams{Workdir: dir, Enclosure: &rpc.EnclosureParam{Driver: "docker", ID: id}})
	t.Logf("run/start: %v", err)
	if err == nil {
		t.Fatal("run/start succeeded in a container that runs no exec")
	}
	if msg := err.Error(); !strings.Contains(msg, "outside of container mount namespace root") || strings.Contains(msg, "a mount over /opt/berth?") || !strings.Contains(msg, "the engine starts no process in it") {
		t.Errorf("run/start: %v\nwant the engine's reason (outside of container mount namespace root), said once as the cause, and no guess at a mount", err)
	}
}

// lsp status tells each server apart (issue 24 item 14): under Docker
// and containerd by the relay's pid as the host sees it (Docker's from the
// engine's exec inspect), a process the container's top lists as gopls's
// relay; under Kubernetes, where no pid can be known, by the relay's tag,
// which that relay's command line carries. Never "pid 0".
func TestContainersLSPStatusTellsTheServersApart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		place   func(t *testing.T) place
		section func(t *testing.T, p place) family
		by      string // ", pid " or ", relay tag "
	}{
		{"docker", func(*testing.T) place { return inContainer(lspImage) }, nil, ", pid "},
		{"containerd", func(t *testing.T) place { return inContainerd(t, lspImage) }, func(*testing.T, place) family { return containerdSection }, ", pid "},
		{"kubernetes", func(t *testing.T) place { return inKubernetes(t, lspImage) }, kubernetesSection, ", relay tag "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.place(t)
			s := p.fresh(t)
			writeTree(t, s.Dir, downProject)
			var fs []family
			if tc.section != nil {
				fs = append(fs, tc.section(t, p))
			}
			c := startFamilies(t, fs...)
			run := s.start(t, c, nil)
			if res := callTool(t, c, run, "lsp", map[string]any{"action": "definition", "file": "main.go", "line": 8, "symbol": "greet"}); res.IsError {
				t.Fatalf("lsp definition: %s", text(res))
			}
			st := text(callTool(t, c, run, "lsp", map[string]any{"action": "status"}))
			t.Logf("lsp status:\n%s", st)
			var id string
			for _, l := range strings.Split(st, "\n") {
				if strings.Contains(l, "gopls for root .:") {
					if _, after, ok := strings.Cut(l, tc.by); ok {
						id, _, _ = strings.Cut(after, ",")
					}
				}
			}
			if id == "" || id == "0" || strings.Contains(st, "pid 0,") {
				t.Fatalf("lsp status does not name gopls by%s:\n%s", tc.by, st)
			}
			top := s.top(t)
			found := false
			for _, proc := range top {
				f := strings.Fields(proc)
				if len(f) < 3 || !strings.Contains(proc, "berth-relay") || !strings.Contains(proc, "gopls") {
					continue
				}
				if tc.by == ", pid " && f[0] == id || tc.by != ", pid " && strings.Contains(proc, "--tag "+id) {
					found = true
				}
			}
			if !found {
				t.Errorf("%s%s is not gopls's relay in the container's processes:\n%s", strings.TrimPrefix(tc.by, ", "), id, strings.Join(top, "\n"))
			}
			if err := c.StopRun(testCtx(t), run); err != nil {
				t.Fatal(err)
			}
			s.waitNoProcesses(t, "run/stop")
		})
	}
}
