package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/internal/procfs"
	"github.com/berth-dev/berth/orchestrator/rpc"
	"github.com/berth-dev/berth/orchestrator/state"
)

// restartGrace is the reattach grace of the restart tests.
const restartGrace = 4 * time.Second

// restartConfig is a configuration with Debian's python for kernels and
// a short reattach grace.
func restartConfig(t *testing.T) string {
	return writeConfig(t, "kernels:\n  python: /usr/bin/python3\nenclosure:\n  reattach_grace: "+restartGrace.String()+"\n")
}

// berth is a Berth on a state directory that a test may kill -9.
type berth struct {
	cmd    *exec.Cmd
	c      *rpc.Client
	stderr interface{ String() string }
}

// startBerth starts "serve --stdio" on the state directory dir with the
// configuration file config. Cleanup stops it in order unless the test
// killed it.
func startBerth(t *testing.T, config, dir string) *berth {
	t.Helper()
	cmd := command(nil, "serve", "--stdio", "--config", config, "--state-dir", dir)
	stderr := newStderr()
	cmd.Stderr = stderr
	c, err := rpc.DialCommand(cmd, rpc.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := &berth{cmd: cmd, c: c, stderr: stderr}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			awaitExit(t, cmd, stderr, c.Close)
		}
	})
	if _, err := c.Initialize(testCtx(t), "berth-e2e", "test"); err != nil {
		t.Fatalf("initialize: %v\nstderr:\n%s", err, stderr.String())
	}
	return b
}

// kill is kill -9 of Berth: nothing of it runs its shutdown.
func (b *berth) kill(t *testing.T) {
	t.Helper()
	if err := b.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = b.c.Close()
	_ = b.cmd.Wait()
}

// records reads the state directory's records, failing on a bad one.
func records(t *testing.T, dir string) []state.Record {
	t.Helper()
	var out []state.Record
	files, _ := filepath.Glob(filepath.Join(dir, "records", "*.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var r state.Record
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, r)
	}
	return out
}

// A Python kernel on the host outlives a kill -9 of Berth for
// enclosure.reattach_grace, held by its relay, and is ended after it:
// nothing of it is left. Its record names its run, conversation and
// relay, with a socket in the state directory, never in the workdir;
// the relay's token is on no command line and in no environment.
//
// Issue 29 items 1 and 2.
func TestKernelOutlivesAKilledBerthForTheGrace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	workdir := t.TempDir()
	b := startBerth(t, restartConfig(t), dir)
	r, err := b.c.StartRun(testCtx(t), rpc.StartRunParams{RunID: "run-kept", ConversationID: "conv-kept", Workdir: workdir})
	if err != nil {
		t.Fatal(err)
	}
	if res := evalCell(t, b.c, r.RunID, "python", "x = 41\nx"); res.IsError || !strings.Contains(text(res), "41") {
		t.Fatalf("the first cell: %s", text(res))
	}
	recs := records(t, dir)
	if len(recs) != 1 {
		t.Fatalf("records %+v, want the kernel's", recs)
	}
	rec := recs[0]
	if rec.Run != "run-kept" || rec.Conversation != "conv-kept" || rec.Kind != "kernel" || rec.Role != "python" ||
		rec.Enclosure.Driver != "host" || !strings.HasPrefix(rec.Relay.Socket, filepath.Join(dir, "relays")+"/") {
		t.Fatalf("the record %+v", rec)
	}
	if st, err := os.Stat(filepath.Join(dir, "records", rec.Relay.Tag+".json")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the record's file: %v, %v", st, err)
	}
	kernel := rec.Relay.Pid
	if !procfs.Alive(kernel) {
		t.Fatalf("the record's pid %d is not the kernel's", kernel)
	}
	for _, p := range procfs.All() {
		if strings.Contains(p.Cmdline(), rec.Relay.Token) {
			t.Errorf("the relay's token is on the command line of %v", p)
		}
		if env, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/environ"); err == nil && strings.Contains(string(env), rec.Relay.Token) {
			t.Errorf("the relay's token is in the environment of %v", p)
		}
	}

	b.kill(t)
	killed := time.Now()
	time.Sleep(restartGrace / 4)
	if !procfs.Alive(kernel) {
		t.Fatal("the kernel ended with Berth, within the grace")
	}
	for deadline := killed.Add(restartGrace + 30*time.Second); procfs.Alive(kernel); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the kernel outlived the grace by 30s")
		}
	}
	if took := time.Since(killed); took < restartGrace*3/4 {
		t.Errorf("the kernel ended %v after the kill, before the grace", took)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		left := procfs.Filter(func(p procfs.Process) bool { return p.Live() && strings.Contains(p.Cmdline(), rec.Relay.Tag) })
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("left after the grace: %v", procfs.Strings(left))
		}
	}
	if _, err := os.Stat(rec.Relay.Socket + relay.ExpiredSuffix); err != nil {
		t.Errorf("the relay left no note that it timed out: %v", err)
	}
}

// An orderly stop of Berth (its stdin's end under --stdio) ends a kept
// kernel at once and removes its record; a second Berth on a state
// directory in use is refused with a clear error.
//
// Issue 29 items 1 and 2.
func TestOrderlyStopEndsKeptKernelsAtOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	config := restartConfig(t)
	b := startBerth(t, config, dir)
	run := newRun(t, b.c, "", nil)
	if res := evalCell(t, b.c, run, "python", "1 + 1"); res.IsError {
		t.Fatalf("the cell: %s", text(res))
	}
	recs := records(t, dir)
	if len(recs) != 1 {
		t.Fatalf("records %+v, want the kernel's", recs)
	}

	second := command(nil, "serve", "--stdio", "--config", config, "--state-dir", dir)
	out, err := second.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "held by another live Berth") {
		t.Errorf("a second Berth on the directory: %v, %s", err, out)
	}

	start := time.Now()
	awaitExit(t, b.cmd, newStderr(), b.c.Close)
	if procfs.Alive(recs[0].Relay.Pid) {
		t.Errorf("the kernel outlived an orderly stop")
	}
	if took := time.Since(start); took > restartGrace {
		t.Errorf("the orderly stop took %v", took)
	}
	if left := records(t, dir); len(left) != 0 {
		t.Errorf("records left after an orderly stop: %+v", left)
	}
}
