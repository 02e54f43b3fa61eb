package procfs

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	for _, c := range []struct {
		stat string
		want Process
		ok   bool
	}{
		{"42 (sh) S 1 42 42 0", Process{PID: 42, PPID: 1, PGID: 42, State: 'S'}, true},
		{"7 (a) b (c)) Z 3 9 9 0", Process{PID: 7, PPID: 3, PGID: 9, State: 'Z'}, true},
		{"7 (no end", Process{}, false},
		{"7 (x) R", Process{}, false},
	} {
		got, ok := parseStat(atoi(c.stat), []byte(c.stat))
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("parseStat(%q) = %#v, %v; want %#v, %v", c.stat, got, ok, c.want, c.ok)
		}
	}
}

func atoi(stat string) int {
	n, _ := strconv.Atoi(strings.Fields(stat)[0])
	return n
}

func TestReadsThisProcessAndItsChildren(t *testing.T) {
	self, ok := Read(os.Getpid())
	if !ok || !self.Live() || self.PPID != os.Getppid() {
		t.Fatalf("Read(self) = %+v, %v", self, ok)
	}
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", "sleep 30 & wait")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	}()
	// The shell's child is a copy of the shell until it has exec'd sleep:
	// wait for the exec too, not only the fork.
	var kids []int
	var sleep Process
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		kids = Descendants(cmd.Process.Pid)
		if len(kids) == 1 {
			if sleep, _ = Read(kids[0]); strings.HasPrefix(sleep.Cmdline(), "sleep") {
				break
			}
		}
	}
	if len(kids) != 1 || !Alive(kids[0]) {
		t.Fatalf("descendants of sh: %v", kids)
	}
	if sleep.PGID != cmd.Process.Pid || !strings.HasPrefix(sleep.Cmdline(), "sleep 30") {
		t.Fatalf("sleep: %+v %q", sleep, sleep.Cmdline())
	}
	if got := Strings(In(dir)); len(got) != 2 {
		t.Fatalf("In(dir) = %v, want sh and sleep", got)
	}
	if Alive(1 << 30) {
		t.Fatal("a pid that cannot exist is alive")
	}
}
