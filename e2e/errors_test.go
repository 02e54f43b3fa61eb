package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure/containerd/containerdtest"
	"github.com/berth-dev/berth/enclosure/docker/dockertest"
	"github.com/berth-dev/berth/internal/errclass"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// The error classes against the real engines (issue 27 item 3): a
// container that is stopped or removed is gone at run/start, and a paused
// one makes a call fail fast, as unavailable, saying to unpause it.

// classEngine is one engine these tests run on: its place, the
// configuration sections its Berth needs, and what its errors say.
type classEngine struct {
	name     string
	place    func(t *testing.T) place
	sections []family
	// stopped, removed and paused do it to a container (the down
	// tests'); atStart is what run/start says of a stopped and of a
	// removed one (the engine cannot tell removed from never made).
	stopped, removed, paused downState
	atStart                  [2][]string
}

var classEngines = []classEngine{
	{name: "docker", place: func(*testing.T) place { return inContainer(kernelImage) },
		stopped: dockerStopped, removed: dockerRemoved, paused: dockerPaused,
		atStart: [2][]string{{"not running", "docker start"}, {"no docker container", "docker ps"}}},
	{name: "containerd", place: func(t *testing.T) place { return inContainerd(t, kernelImage) },
		sections: []family{containerdSection}, stopped: ctrStopped, removed: ctrRemoved, paused: ctrPaused,
		atStart: [2][]string{{"stopped", "task start", "start a new run"}, {"no containerd container", "containers ls"}}},
}

// rpcClass is the class a JSON-RPC error of Berth's carries in its data.
func rpcClass(err error) errclass.Class {
	var e *rpc.Error
	if errors.As(err, &e) {
		return e.ClassOf()
	}
	return ""
}

// run/start in a container that is stopped, or was removed, is gone
// (-32002, data.class "gone"): only another container helps. It was
// invalid params (-32602), as if the request were wrong.
//
// Issue 27 item 3.
func TestContainersRunStartInAStoppedOrRemovedContainerIsGone(t *testing.T) {
	for _, eng := range classEngines {
		t.Run(eng.name, func(t *testing.T) {
			p := eng.place(t)
			c := startFamilies(t, eng.sections...)
			for i, st := range []downState{eng.stopped, eng.removed} {
				s := p.fresh(t)
				st.apply(t, s, nil)
				_, err := c.StartRun(testCtx(t), s.params(nil))
				t.Logf("run/start in a %s container: %v", st.name, err)
				if rpcCode(err) != rpc.CodeGone || rpcClass(err) != errclass.Gone {
					t.Errorf("run/start in a %s container: %v (code %d, class %q); want gone (%d)", st.name, err, rpcCode(err), rpcClass(err), rpc.CodeGone)
				}
				for _, w := range append([]string{s.Container[:12]}, eng.atStart[i]...) {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Errorf("run/start in a %s container: %v; want it to say %q", st.name, err, w)
					}
				}
			}
		})
	}
}

// A call in a run whose container is paused fails fast, as an error
// result of class unavailable that says the container is paused and to
// unpause it, instead of waiting out its timeout (here a cell's idle
// budget of 5 minutes, the default); once unpaused, the run goes on.
//
// Issue 27 item 3.
func TestContainersCallInAPausedContainerFailsFast(t *testing.T) {
	for _, eng := range classEngines {
		t.Run(eng.name, func(t *testing.T) {
			s := eng.place(t).fresh(t)
			c := startFamilies(t, append(eng.sections, family{config: map[string]any{"kernels": map[string]any{"python": "/usr/bin/python3"}}})...)
			run := s.start(t, c, nil)
			if res := evalCell(t, c, run, "python", "x = 41\nx"); res.IsError || text(res) != "41" {
				t.Fatalf("warming the kernel: %s", text(res))
			}
			eng.paused.apply(t, s, nil)

			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			res, err := c.CallTool(ctx, run, orchestrator.SurfaceFull, "eval", map[string]any{"code": "x + 1", "language": "python", "description": "a cell in a paused container"})
			took := time.Since(start)
			if err != nil {
				t.Fatalf("eval in a paused container: a protocol error instead of an error result: %v", err)
			}
			t.Logf("eval in a paused container (%s): %s", took.Round(time.Millisecond), text(res))
			if !res.IsError || res.ErrorClass != errclass.Unavailable {
				t.Errorf("eval in a paused container: isError %v, errorClass %q; want an error result of class unavailable", res.IsError, res.ErrorClass)
			}
			for _, w := range append([]string{"paused"}, eng.paused.want...) {
				if !strings.Contains(text(res), w) {
					t.Errorf("eval in a paused container: the answer lacks %q: %s", w, text(res))
				}
			}
			if took > 20*time.Second {
				t.Errorf("eval in a paused container took %s; want it to fail fast", took)
			}

			// Unpaused, the same run answers again.
			if eng.name == "docker" {
				dockertest.Must(t, "unpause", s.Container)
			} else if _, err := containerdtest.Ctr("tasks", "resume", s.Container); err != nil {
				t.Fatal(err)
			}
			if res := evalCell(t, c, run, "python", "1 + 1"); res.IsError || text(res) != "2" {
				t.Errorf("eval once the container is unpaused: %s", text(res))
			}
		})
	}
}

// vibe_wait on a worker whose container is paused does not answer "still
// running": it says the container is paused and to unpause it, as an
// error result of class unavailable, at once rather than after its wait;
// once unpaused, the worker is running again.
//
// Issue 27 item 3.
func TestContainersVibeWaitInAPausedContainerSaysItIsPaused(t *testing.T) {
	eng := classEngines[0]
	s := eng.place(t).fresh(t)
	c := startFamilies(t, family{config: map[string]any{"vibe": map[string]any{"runners": map[string][]string{
		"fast": {"/bin/sh", "-c", "cat >/dev/null; sleep 600"},
		"good": {"/bin/sh", "-c", "cat >/dev/null; sleep 600"},
	}}}})
	run := s.start(t, c, map[string]bool{"vibe": true})
	if res := callTool(t, c, run, "vibe_spawn", map[string]any{"brief": "port the parser", "label": "parser"}); res.IsError {
		t.Fatalf("vibe_spawn: %s", text(res))
	}
	eng.paused.apply(t, s, nil)

	start := time.Now()
	res := callTool(t, c, run, "vibe_wait", map[string]any{"worker_id": "w1", "timeout_seconds": 60})
	took := time.Since(start)
	t.Logf("vibe_wait in a paused container (%s): %s", took.Round(time.Millisecond), text(res))
	if !res.IsError || res.ErrorClass != errclass.Unavailable || strings.Contains(text(res), "Still running") {
		t.Errorf("vibe_wait in a paused container: isError %v, errorClass %q: %s; want an error result of class unavailable, not \"Still running\"", res.IsError, res.ErrorClass, text(res))
	}
	for _, w := range append([]string{"w1", "paused"}, eng.paused.want...) {
		if !strings.Contains(text(res), w) {
			t.Errorf("vibe_wait in a paused container: the answer lacks %q: %s", w, text(res))
		}
	}
	if took > 20*time.Second {
		t.Errorf("vibe_wait in a paused container took %s; want it answered before its 60s wait", took)
	}

	dockertest.Must(t, "unpause", s.Container)
	res = callTool(t, c, run, "vibe_wait", map[string]any{"worker_id": "w1", "timeout_seconds": 1})
	if res.IsError || !strings.Contains(text(res), "Still running") {
		t.Errorf("vibe_wait once the container is unpaused: %s; want \"Still running\"", text(res))
	}
	if res := callTool(t, c, run, "vibe_kill", map[string]any{"worker_id": "w1"}); res.IsError {
		t.Errorf("vibe_kill: %s", text(res))
	}
}
