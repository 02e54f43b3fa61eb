//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/berth-dev/berth/internal/procfs"
)

// signalMode sends a signal to a process group, or to the relay started
// with --tag T (which forwards it to its group, as run describes).
func signalMode(args []string) int {
	if len(args) != 2 {
		return fail("signal: want a target and a signal\n%s", usage)
	}
	sig, err := parseSignal(args[1])
	if err != nil {
		return fail("signal: %v", err)
	}
	target, ok := strings.CutPrefix(args[0], "tag=")
	if ok {
		pid, err := findTagged(target)
		if err != nil {
			return fail("signal: %v", err)
		}
		if err := syscall.Kill(pid, sig); err != nil {
			return fail("signal: relay %d: %v", pid, err)
		}
		return 0
	}
	pgid, err := strconv.Atoi(args[0])
	// 0 and 1 would mean the caller's own group and every process.
	if err != nil || pgid < 2 {
		return fail("signal: %q is neither a process group id (2 or more) nor tag=T", args[0])
	}
	if err := syscall.Kill(-pgid, sig); err != nil {
		return fail("signal: process group %d: %v", pgid, err)
	}
	return 0
}

// memMode prints the resident memory, in bytes, of what the relay
// started with --tag T runs: its descendants (the program, and what it
// started, which the relay reaps as a subreaper).
func memMode(args []string) int {
	target, ok := "", len(args) == 1
	if ok {
		target, ok = strings.CutPrefix(args[0], "tag=")
	}
	if !ok {
		return fail("mem: want tag=T\n%s", usage)
	}
	pid, err := findTagged(target)
	if err != nil {
		return fail("mem: %v", err)
	}
	var n int64
	for _, d := range procfs.Descendants(pid) {
		m, _ := procfs.RSS(d)
		n += m
	}
	fmt.Println(n)
	return 0
}

// parseSignal reads TERM, SIGTERM or 15.
func parseSignal(s string) (syscall.Signal, error) {
	if n, err := strconv.Atoi(s); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	return 0, fmt.Errorf("unknown signal %q: give a name such as TERM or INT, or a number", s)
}

// findTagged finds the one relay running "run --tag tag".
func findTagged(tag string) (int, error) {
	if tag == "" {
		return 0, fmt.Errorf("tag= needs a tag")
	}
	var found []int
	for _, p := range procfs.All() {
		if !p.Live() || p.PID == os.Getpid() {
			continue
		}
		raw, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/cmdline")
		if err != nil {
			continue
		}
		argv := strings.Split(string(bytes.TrimSuffix(raw, []byte{0})), "\x00")
		if len(argv) < 2 || argv[1] != "run" {
			continue
		}
		if f, _, err := parseRunFlags(argv[2:]); err == nil && f.tag == tag {
			found = append(found, p.PID)
		}
	}
	switch len(found) {
	case 0:
		return 0, fmt.Errorf("no relay runs with --tag %s (it ended, or runs in another pid namespace)", tag)
	case 1:
		return found[0], nil
	}
	return 0, fmt.Errorf("%d relays run with --tag %s (pids %v): tags must be unique", len(found), tag, found)
}
