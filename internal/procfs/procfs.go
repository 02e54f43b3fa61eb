// Package procfs reads Linux's process table under /proc: which processes
// exist, their parent, group and state, working directory and command
// line, resident memory. The host enclosure uses it to find descendants that left a
// process group; tests use it to prove that nothing was left running.
//
// It only reads; it never signals or changes a process.
package procfs

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// Process is one entry of the process table.
type Process struct {
	PID, PPID, PGID int
	// State is the kernel's one-letter state: R, S, D, T, Z (zombie),
	// X (dead), ...
	State byte
}

// Live says whether the process is still running: a zombie keeps its
// /proc entry until it is reaped, but runs nothing.
func (p Process) Live() bool { return p.State != 'Z' && p.State != 'X' }

// Cwd is the process's working directory, or "" if it cannot be read (it
// exited, or belongs to someone else).
func (p Process) Cwd() string {
	cwd, _ := os.Readlink("/proc/" + strconv.Itoa(p.PID) + "/cwd")
	return cwd
}

// Cmdline is the process's command line with its arguments joined by
// spaces.
func (p Process) Cmdline() string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/cmdline")
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// String is "PID: command line", for test failure messages.
func (p Process) String() string { return strconv.Itoa(p.PID) + ": " + p.Cmdline() }

// Read returns the process with pid, and false if there is none.
func Read(pid int) (Process, bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Process{}, false
	}
	return parseStat(pid, stat)
}

// parseStat reads the fields after the command name, which may itself
// hold spaces and parentheses: state, parent pid, process group.
func parseStat(pid int, stat []byte) (Process, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return Process{}, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 3 || len(f[0]) != 1 {
		return Process{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgid, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return Process{}, false
	}
	return Process{PID: pid, PPID: ppid, PGID: pgid, State: f[0][0]}, true
}

// Alive says whether pid exists and is not a zombie.
func Alive(pid int) bool {
	p, ok := Read(pid)
	return ok && p.Live()
}

// All lists every process, zombies included. Processes that exit while
// the table is read are left out.
func All() []Process {
	entries, _ := os.ReadDir("/proc")
	var out []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := Read(pid); ok {
			out = append(out, p)
		}
	}
	return out
}

// RSS is the resident memory of pid in bytes (/proc/PID/statm), and
// false when it cannot be read (it exited, or belongs to someone else).
func RSS(pid int) (int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, false
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, false
	}
	return pages * int64(os.Getpagesize()), true
}

// TreeRSS is the resident memory of pid and all its descendants in
// bytes; those that exit meanwhile count nothing. ok is false when pid's
// own cannot be read.
func TreeRSS(pid int) (n int64, ok bool) {
	n, ok = RSS(pid)
	if !ok {
		return 0, false
	}
	for _, d := range Descendants(pid) {
		m, _ := RSS(d)
		n += m
	}
	return n, true
}

// Children lists pid's children, zombies included, from the children
// lists of its threads (/proc/PID/task/TID/children): a few small reads,
// where finding them in the whole table reads every process's stat.
func Children(pid int) []int {
	tasks := "/proc/" + strconv.Itoa(pid) + "/task"
	ids, _ := os.ReadDir(tasks)
	var out []int
	for _, id := range ids {
		b, _ := os.ReadFile(tasks + "/" + id.Name() + "/children")
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// Descendants lists pid's children, their children and so on, zombies
// included, whatever process group they moved to.
func Descendants(pid int) []int {
	var out []int
	for queue := Children(pid); len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, Children(queue[0])...)
	}
	return out
}

// In lists the processes, zombies included, whose working directory is
// dir or inside it.
func In(dir string) []Process {
	return Filter(func(p Process) bool {
		cwd := p.Cwd()
		return cwd != "" && (cwd == dir || strings.HasPrefix(cwd, dir+"/"))
	})
}

// Filter lists the processes for which keep is true.
func Filter(keep func(Process) bool) []Process {
	var out []Process
	for _, p := range All() {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}

// Strings renders processes with String, for test failure messages.
func Strings(ps []Process) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}
