package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// orchestrator handoff signals only an `orchestrator serve`: a pid that
// is another program (here a sleep) is refused and lives on, as are a
// missing pid file, one that holds no pid, and no Berth named at all.
//
// Issue 29 item 4.
func TestHandoffSignalsOnlyAServingBerth(t *testing.T) {
	sleep := exec.Command("sleep", "30")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleep.Process.Kill(); _ = sleep.Wait() }()
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pid")
	os.WriteFile(garbage, []byte("twelve\n"), 0o600)
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--pid", strconv.Itoa(sleep.Process.Pid)}, "not orchestrator"},
		{[]string{}, "name the Berth to hand off with --pid PID or --pid-file FILE"},
		{[]string{"--pid-file", filepath.Join(dir, "none.pid")}, "is Berth serving with --pid-file"},
		{[]string{"--pid-file", garbage}, `holds "twelve", not a pid`},
		{[]string{"--pid", "1", "--pid-file", garbage}, "not both"},
	} {
		var out, errb bytes.Buffer
		err := run(append([]string{"handoff"}, tc.args...), &out, &errb)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("handoff %v: %v, want an error saying %q", tc.args, err, tc.says)
		}
	}
	if !alive(sleep.Process.Pid) {
		t.Fatal("handoff signalled a process that is no Berth")
	}
}
