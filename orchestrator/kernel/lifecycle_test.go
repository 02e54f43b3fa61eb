package kernel

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/berth-dev/berth/orchestrator/metrics"
)

func TestReset(t *testing.T) {
	e := newEnv(t, testConfig(), nil)
	mustOK(t, e.eval("kept = 7"))
	pid := e.pidOf(Python)
	got := mustOK(t, e.eval("'kept' in globals()", reset))
	if got != "False" {
		t.Fatalf("after reset the variable survived: %s", got)
	}
	waitGone(t, pid)
	if got := mustOK(t, e.eval("", reset)); !strings.Contains(got, "reset") {
		t.Errorf("reset with no code: %s", got)
	}
	// A discarded kernel stops in the background, so its end is counted
	// once it has stopped.
	ends := e.reg.Metrics().SessionEnds.WithLabelValues(metrics.KindKernel, metrics.ReasonStopped)
	for deadline := time.Now().Add(10 * time.Second); testutil.ToFloat64(ends) < 2 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if n := testutil.ToFloat64(ends); n != 2 {
		t.Errorf("kernel ends (stopped) = %v, want 2", n)
	}
}

// TestDyingKernel: a kernel that exits or crashes mid-cell is reported as
// dead with its state lost, and the next call gets a fresh one.
func TestDyingKernel(t *testing.T) {
	tests := []struct {
		name, code string
		want       []string
	}{
		{"os._exit", "print('going')\nimport os\nos._exit(3)", []string{"going", "died", "exited with status 3", "state", "fresh"}},
		{"segfault", "import ctypes\nctypes.string_at(0)", []string{"died", "killed by a signal", "Segmentation fault"}},
		{"SIGKILL, as the OOM killer sends", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", []string{"died", "killed by a signal", "state", "fresh"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, testConfig(), nil)
			mustOK(t, e.eval("state = 1"))
			r := e.eval(tt.code)
			if !r.IsError {
				t.Fatalf("a dead kernel is not an error: %s", text(r))
			}
			for _, w := range tt.want {
				if !strings.Contains(text(r), w) {
					t.Errorf("result lacks %q:\n%s", w, text(r))
				}
			}
			if got := mustOK(t, e.eval("'state' in globals()")); got != "False" {
				t.Errorf("next call did not get a fresh kernel: %s", got)
			}
			if n := testutil.ToFloat64(e.reg.Metrics().SessionEnds.WithLabelValues(metrics.KindKernel, metrics.ReasonCrashed)); n != 1 {
				t.Errorf("kernel ends (crashed) = %v, want 1", n)
			}
		})
	}
}

func TestOutputCaps(t *testing.T) {
	cfg := testConfig()
	cfg.OutputLimit = 1000
	cfg.ImageLimit = 2000
	cfg.MaxImages = 2
	e := newEnv(t, cfg, nil)
	got := mustOK(t, e.eval("for i in range(5000):\n    print('line', i)"))
	for _, w := range []string{"line 0\n", "line 4999\n", "of output cut here"} {
		if !strings.Contains(got, w) {
			t.Errorf("capped output lacks %q:\n%s", w, got)
		}
	}
	if len(got) > 1300 {
		t.Errorf("capped output is %d bytes, want about 1000", len(got))
	}
	r := e.eval("import matplotlib.pyplot as plt\nfig = plt.figure(figsize=(8, 8))\nplt.plot(range(100));")
	if len(blocks(r, "image")) != 0 || !strings.Contains(text(r), "over the 2000 bytes cap per image") {
		t.Errorf("an image over the cap is not replaced by a note: %s", text(r))
	}
	small := "import base64\nclass P:\n    def _repr_png_(self): return base64.b64decode('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==')\ndisplay(P(), P(), P())"
	r = e.eval(small)
	if len(blocks(r, "image")) != 2 || !strings.Contains(text(r), "already returned 2 images") {
		t.Errorf("image count cap: %d images, text %s", len(blocks(r, "image")), text(r))
	}
}

func TestDescriptionAndArguments(t *testing.T) {
	e := newEnv(t, testConfig(), nil)
	tests := []struct {
		name string
		opt  func(map[string]any)
		want string
	}{
		{"too short", func(a map[string]any) { a["description"] = "run it" }, `"description" must be 5-10 words saying what the cell does`},
		{"too long", func(a map[string]any) { a["description"] = strings.Repeat("word ", 11) }, `(got "word word word word word word word word word word word ")`},
		{"missing", func(a map[string]any) { delete(a, "description") }, "description"},
		{"unknown language", func(a map[string]any) { a["language"] = "ruby" }, "language"},
		{"unknown field", func(a map[string]any) { a["timeout"] = 3 }, "timeout"},
		{"empty code", func(a map[string]any) { a["code"] = " " }, "code is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.eval("1", tt.opt)
			if !r.IsError || !strings.Contains(text(r), tt.want) {
				t.Errorf("want an error mentioning %q, got %v: %s", tt.want, r.IsError, text(r))
			}
		})
	}
}

// TestIdleTimeout: a kernel unused for kernels.idle_timeout shuts down and
// is counted; the next call starts a fresh one.
func TestIdleTimeout(t *testing.T) {
	cfg := testConfig()
	cfg.IdleTimeout = 300 * time.Millisecond
	e := newEnv(t, cfg, nil)
	pid := e.pidOf(Python)
	waitGone(t, pid)
	m := e.reg.Metrics()
	idle := m.SessionEnds.WithLabelValues(metrics.KindKernel, metrics.ReasonIdle)
	for deadline := time.Now().Add(5 * time.Second); testutil.ToFloat64(idle) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // the count follows the process's exit
	}
	if n := testutil.ToFloat64(idle); n != 1 {
		t.Errorf("kernel ends (idle) = %v, want 1", n)
	}
	if n := testutil.ToFloat64(m.SessionsActive.WithLabelValues(metrics.KindKernel, metrics.DriverHost)); n != 0 {
		t.Errorf("kernels active = %v, want 0", n)
	}
	if pid2 := e.pidOf(Python); pid2 == pid {
		t.Error("the culled kernel answered again")
	}
}

// TestNoSocket: the kernel talks over its pipes only; it holds no socket.
func TestNoSocket(t *testing.T) {
	for _, lang := range []string{Python, JavaScript} {
		t.Run(lang, func(t *testing.T) {
			e := newEnv(t, testConfig(), &testHarness{})
			pid := e.pidOf(lang)
			fds, err := os.ReadDir(filepath.Join("/proc", itoa(pid), "fd"))
			if err != nil {
				t.Fatal(err)
			}
			var pipes int
			for _, fd := range fds {
				link, err := os.Readlink(filepath.Join("/proc", itoa(pid), "fd", fd.Name()))
				if err != nil {
					continue
				}
				if strings.HasPrefix(link, "socket:") {
					t.Errorf("kernel fd %s is a socket (%s)", fd.Name(), link)
				}
				if strings.HasPrefix(link, "pipe:") {
					pipes++
				}
			}
			if pipes == 0 {
				t.Error("kernel holds no pipe: is this the kernel?")
			}
		})
	}
}

// TestRunEndLeavesNothing: ending the run kills every kernel and what the
// kernels started.
func TestRunEndLeavesNothing(t *testing.T) {
	e := newEnv(t, testConfig(), nil)
	py := e.pidOf(Python)
	node := e.pidOf(JavaScript)
	child := e.eval("import subprocess\np = subprocess.Popen(['sleep', '300'])\np.pid")
	var sleeper int
	if _, err := fmt.Sscan(mustOK(t, child), &sleeper); err != nil {
		t.Fatal(err)
	}
	e.run.End("stopped")
	for _, pid := range []int{py, node, sleeper} {
		waitGone(t, pid)
	}
	if n := testutil.ToFloat64(e.reg.Metrics().SessionsActive.WithLabelValues(metrics.KindKernel, metrics.DriverHost)); n != 0 {
		t.Errorf("kernels active after run end = %v, want 0", n)
	}
	if r, err := e.reg.Call(context.Background(), e.run, "full", "eval", []byte(`{"code":"1","description":"one more cell after the end"}`)); err == nil {
		t.Errorf("eval on an ended run: %+v", r)
	}
}

// TestStartFailure: an interpreter that is missing or dies before the
// handshake is a clear error result naming the setting to fix.
func TestStartFailure(t *testing.T) {
	tests := []struct {
		name, python, node string
		want               []string
	}{
		{"missing", "/nonexistent/python3", "", []string{"could not start", "/nonexistent/python3", "kernels.python"}},
		{"not a python", "/bin/false", "", []string{"could not start", "ended before it was ready"}},
		{"missing node", "", "/nonexistent/node", []string{"javascript kernel could not start", "/nonexistent/node", "kernels.node"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			opt := func(map[string]any) {}
			if tt.python != "" {
				cfg.Python = tt.python
			}
			if tt.node != "" {
				cfg.Node, opt = tt.node, js
			}
			e := newEnv(t, cfg, nil)
			r := e.eval("1", opt)
			if !r.IsError {
				t.Fatalf("want an error, got %s", text(r))
			}
			for _, w := range tt.want {
				if !strings.Contains(text(r), w) {
					t.Errorf("result lacks %q: %s", w, text(r))
				}
			}
			if n := testutil.ToFloat64(e.reg.Metrics().SessionStarts.WithLabelValues(metrics.KindKernel, "error")); n != 1 {
				t.Errorf("failed kernel starts = %v, want 1", n)
			}
		})
	}
}

// TestOversizedMessage: a display bigger than the protocol's frame limit
// stops the kernel with a result that says why, not a mystery death.
func TestOversizedMessage(t *testing.T) {
	noLeaks(t)
	e := newEnv(t, testConfig(), nil)
	r := e.eval("display({'image/png': 'A' * (65 << 20)}, raw=True)")
	if !r.IsError || !strings.Contains(text(r), "over the 64 MB limit of the protocol") {
		t.Fatalf("oversized message: %s", text(r))
	}
	if got := mustOK(t, e.eval("1 + 1")); got != "2" {
		t.Errorf("next call: %s", got)
	}
}

// TestDiedThenCannotStart: a kernel that died between cells and cannot be
// started again gets both said: the start failure and the lost state.
func TestDiedThenCannotStart(t *testing.T) {
	cfg := testConfig()
	cfg.Python = filepath.Join(t.TempDir(), "python3")
	if err := os.Symlink(systemPython, cfg.Python); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, cfg, nil)
	pid := e.pidOf(Python)
	if err := os.Remove(cfg.Python); err != nil {
		t.Fatal(err)
	}
	mustOK(t, e.eval("import threading, os\nthreading.Timer(0.1, lambda: os._exit(5)).start()"))
	waitGone(t, pid)
	e.waitSeenExit(Python)
	r := e.eval("1")
	for _, w := range []string{"could not start", "kernels.python", "previous one had died", "exited with status 5"} {
		if !r.IsError || !strings.Contains(text(r), w) {
			t.Errorf("result lacks %q: %s", w, text(r))
		}
	}
}
