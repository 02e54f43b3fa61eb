package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure/containerd/containerdtest"
	"github.com/berth-dev/berth/enclosure/docker/dockertest"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// The container as the agent sees it (issue 24 items 16 and 5), in a
// berth/full container of Docker and of containerd, through a real
// orchestrator binary.

// pathsPlaces are the engines these tests run in: Docker, and the tests'
// containerd.
func pathsPlaces(t *testing.T) []place {
	t.Helper()
	return []place{inContainer(fullImage), inContainerd(t, fullImage)}
}

// pathsClient starts the binary for p's engine with the debug section and
// extra configuration.
func pathsClient(t *testing.T, p place, extra map[string]any) *rpc.Client {
	t.Helper()
	fs := []family{{name: "debug", config: debugSection}}
	if p.engine == engineContainerd {
		fs = append(fs, containerdSection)
	}
	return startFamilies(t, append(fs, family{name: "extra", config: extra})...)
}

// An agent whose shell runs in the container passes paths as it sees
// them (/workspace/main.go). Every tool and protocol method that takes a
// path accepts one that maps into the workdir: lsp, lsp_rename, ast_grep,
// ast_edit, debug (breakpoints and program), files/willWrite and
// files/didWrite. Answers show paths relative to the workdir, the debugged
// program's output too; a path that leaves the workdir (.., a symlink out)
// is refused with the workdir named as the container sees it, never the
// host's path. Before, each was refused as "outside the working directory
// <host path>".
func TestContainersAcceptPathsAsTheContainerSeesThem(t *testing.T) {
	for _, p := range pathsPlaces(t) {
		t.Run(p.driver(), func(t *testing.T) {
			s := p.fresh(t)
			copyProjectInto(t, "go", s.Dir)
			writeTree(t, s.Dir, debugApp)
			writeTree(t, s.Dir, map[string]string{"where.py": "print(\"running\", __file__)\n"})
			if err := os.Symlink("/etc", filepath.Join(s.Dir, "esc")); err != nil {
				t.Fatal(err)
			}
			c := pathsClient(t, p, nil)
			run := s.start(t, c, nil)
			in := func(rel string) string { return s.Inside + "/" + rel }
			ok := func(name string, args map[string]any, want ...string) string {
				t.Helper()
				res := callTool(t, c, run, name, args)
				got := text(res)
				if res.IsError {
					t.Fatalf("%s %v: %s", name, args, got)
				}
				for _, w := range want {
					if !strings.Contains(got, w) {
						t.Errorf("%s %v: missing %q in:\n%s", name, args, w, got)
					}
				}
				if strings.Contains(got, s.Inside+"/") || strings.Contains(got, s.Dir) {
					t.Errorf("%s %v shows an absolute workdir path, not a relative one:\n%s", name, args, got)
				}
				return got
			}
			refused := func(name string, args map[string]any) {
				t.Helper()
				res := callTool(t, c, run, name, args)
				got := text(res)
				if !res.IsError || !strings.Contains(got, "outside the working directory "+s.Inside+" (as the container sees it)") ||
					!strings.Contains(got, "relative to it") || strings.Contains(got, s.Dir) {
					t.Errorf("%s %v: %s\nwant a refusal naming %s as the container sees it, suggesting a relative path, without the host's path", name, args, got, s.Inside)
				}
			}

			ok("lsp", map[string]any{"action": "definition", "file": in("main.go"), "line": 11, "symbol": "g.Greet"}, "greet/greet.go:6:2")
			ok("lsp", map[string]any{"action": "references", "file": in("greet/greet.go"), "line": 21, "symbol": "Hello"}, "main.go:12:")
			refused("lsp", map[string]any{"action": "hover", "file": "/etc/passwd", "line": 1, "symbol": "root"})
			refused("lsp", map[string]any{"action": "hover", "file": in("../etc/passwd"), "line": 1, "symbol": "root"})
			refused("lsp", map[string]any{"action": "hover", "file": in("esc/passwd"), "line": 1, "symbol": "root"})

			ctx := testCtx(t)
			if err := c.WillWrite(ctx, run, []string{in("main.go")}); err != nil {
				t.Fatalf("files/willWrite %s: %v", in("main.go"), err)
			}
			rep, err := c.DidWrite(ctx, run, []string{in("main.go")})
			if err != nil {
				t.Fatalf("files/didWrite %s: %v", in("main.go"), err)
			}
			if rep.State != "clean" {
				t.Errorf("files/didWrite %s: %s (%s), want clean", in("main.go"), rep.State, rep.Text)
			}
			if err := c.WillWrite(ctx, run, []string{"/etc/passwd"}); err == nil || !strings.Contains(err.Error(), s.Inside) || strings.Contains(err.Error(), s.Dir) {
				t.Errorf("files/willWrite /etc/passwd: %v, want a refusal naming %s and not the host's path", err, s.Inside)
			}

			ok("ast_grep", map[string]any{"pattern": "fmt.Println($A)", "path": in("main.go"), "language": "go"}, "main.go:11:")
			ok("ast_grep", map[string]any{"pattern": "fmt.Println($A)", "path": s.Inside, "language": "go"}, "main.go:11:")
			refused("ast_grep", map[string]any{"pattern": "root", "path": "/etc"})
			staged := ok("ast_edit", map[string]any{"pattern": `greet.Hello("twice")`, "rewrite": `greet.Hello("thrice")`, "path": in("main.go"), "language": "go"}, "(proposed) 1 replacement in 1 file")
			id := regexp.MustCompile(`edit_id "([^"]+)"`).FindStringSubmatch(staged)
			if id == nil {
				t.Fatalf("no edit_id in:\n%s", staged)
			}
			ok("resolve", map[string]any{"edit_id": id[1], "action": "accept"}, "main.go")
			ok("lsp_rename", map[string]any{"file": in("greet/greet.go"), "line": 21, "symbol": "Hello", "new_name": "Hi"}, "Renamed", "main.go: ")
			if b, _ := os.ReadFile(filepath.Join(s.Dir, "main.go")); !strings.Contains(string(b), `greet.Hi("thrice")`) {
				t.Errorf("main.go after ast_edit and lsp_rename through container paths:\n%s", b)
			}

			ok("debug", map[string]any{"operation": "breakpoints", "file": in("app.py"), "lines": []int{3}}, "stored 1 breakpoint in app.py")
			ok("debug", map[string]any{"operation": "launch", "program": in("app.py")}, "app.py:3 verified", "stopped (breakpoint)")
			ok("debug", map[string]any{"operation": "continue"}, "the program ended")
			ok("debug", map[string]any{"operation": "launch", "program": in("where.py")})
			for range 40 {
				if strings.Contains(text(callTool(t, c, run, "debug", map[string]any{"operation": "output"})), "running") {
					break
				}
				time.Sleep(250 * time.Millisecond)
			}
			ok("debug", map[string]any{"operation": "output"}, "running where.py")
			refused("debug", map[string]any{"operation": "launch", "program": in("esc/hostname")})
			// delve builds the program and says so on its stdout
			// ("Building /workspace/gosub"): shown relative.
			copyTree(t, filepath.Join("..", "orchestrator", "debug", "testdata", "golang"), filepath.Join(s.Dir, "gosub"))
			ok("debug", map[string]any{"operation": "breakpoints", "file": in("app.py"), "lines": []int{}}, "cleared the breakpoints of app.py")
			ok("debug", map[string]any{"operation": "launch", "program": in("gosub")}, "launched gosub with delve")
			for range 40 {
				if strings.Contains(text(callTool(t, c, run, "debug", map[string]any{"operation": "output"})), "total 49") {
					break
				}
				time.Sleep(250 * time.Millisecond)
			}
			ok("debug", map[string]any{"operation": "output"}, "Building gosub", "total 49")

			if err := c.StopRun(testCtx(t), run); err != nil {
				t.Fatal(err)
			}
			s.waitNoProcesses(t, "run/stop")
		})
	}
}

// readOnlySite is a site whose container mounts the workdir read-only at
// /workspace (docker run -v DIR:/workspace:ro; ctr run --mount
// ...,options=rbind:ro).
func readOnlySite(t *testing.T, p place) *site {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := &site{place: p, Dir: dir, Inside: "/workspace", Conversation: fmt.Sprintf("e2e-%s-%d", sanitize(t.Name()), rand.Uint32()), asker: &asker{}}
	if p.engine == engineContainerd {
		s.Container = containerdtest.Run(t, e2eLabel, s.Conversation, p.image, "",
			"--mount", "type=bind,src="+dir+",dst=/workspace,options=rbind:ro")
		return s
	}
	s.Container = dockertest.Must(t, "run", "-d", "--network", "none", "-v", dir+":/workspace:ro",
		"--label", "berth.conversation="+s.Conversation, p.image, "sleep", "infinity")
	t.Cleanup(func() {
		if _, err := dockertest.Run("rm", "-f", s.Container); err != nil {
			t.Errorf("removing the test's container: %v", err)
		}
	})
	return s
}

// A workdir the container mounts read-only is not written by lsp_rename
// or ast_edit (and so resolve, which applies what ast_edit staged): the
// error says the container has it read-only, names the setting that
// allows it, and every file keeps its content. With
// enclosure.write_read_only_mounts set, a harness whose own file tools
// write the host's copy gets the writes. Before, both wrote through.
func TestContainersReadOnlyWorkdirIsNotWritten(t *testing.T) {
	for _, p := range pathsPlaces(t) {
		t.Run(p.driver(), func(t *testing.T) {
			s := readOnlySite(t, p)
			copyProjectInto(t, "go", s.Dir)
			if out, err := s.command("touch", "probe").CombinedOutput(); err == nil {
				t.Fatalf("the container could write its read-only workdir: %s", out)
			}
			rename := map[string]any{"file": "greet/greet.go", "line": 21, "symbol": "Hello", "new_name": "Hi"}
			edit := map[string]any{"pattern": `greet.Hello("twice")`, "rewrite": `greet.Hello("thrice")`, "path": "main.go", "language": "go"}

			before := snapshotTree(t, s.Dir)
			c := pathsClient(t, p, nil)
			run := s.start(t, c, nil)
			for _, call := range []struct {
				name string
				args map[string]any
			}{{"ast_edit", edit}, {"lsp_rename", rename}} {
				name := call.name
				res := callTool(t, c, run, name, call.args)
				got := text(res)
				t.Logf("%s on a read-only workdir: %s", name, got)
				if !res.IsError || !strings.Contains(got, "read-only") || !strings.Contains(got, "/workspace") ||
					!strings.Contains(got, "enclosure.write_read_only_mounts") || !strings.Contains(got, "nothing") {
					t.Errorf("%s on a read-only workdir: %s\nwant a refusal that says the container has it read-only and names enclosure.write_read_only_mounts", name, got)
				}
			}
			if after := snapshotTree(t, s.Dir); !sameTree(before, after) {
				t.Errorf("the read-only workdir was written:\nbefore %v\nafter %v", before, after)
			}
			if err := c.StopRun(testCtx(t), run); err != nil {
				t.Fatal(err)
			}

			c = pathsClient(t, p, map[string]any{"enclosure": map[string]any{"write_read_only_mounts": true, "auto": []string{p.driver()}}})
			run = s.start(t, c, nil)
			res := callTool(t, c, run, "ast_edit", edit)
			id := regexp.MustCompile(`edit_id "([^"]+)"`).FindStringSubmatch(text(res))
			if res.IsError || id == nil {
				t.Fatalf("ast_edit with enclosure.write_read_only_mounts: %s", text(res))
			}
			if res := callTool(t, c, run, "resolve", map[string]any{"edit_id": id[1], "action": "accept"}); res.IsError {
				t.Errorf("resolve with enclosure.write_read_only_mounts: %s", text(res))
			}
			if res := callTool(t, c, run, "lsp_rename", rename); res.IsError || !strings.Contains(text(res), "Renamed") {
				t.Errorf("lsp_rename with enclosure.write_read_only_mounts: %s", text(res))
			}
			if b, _ := os.ReadFile(filepath.Join(s.Dir, "main.go")); !strings.Contains(string(b), `greet.Hi("thrice")`) {
				t.Errorf("main.go with enclosure.write_read_only_mounts:\n%s", b)
			}
			if err := c.StopRun(testCtx(t), run); err != nil {
				t.Fatal(err)
			}
			s.waitNoProcesses(t, "run/stop")
		})
	}
}

// snapshotTree is every regular file under dir and its content.
func snapshotTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
