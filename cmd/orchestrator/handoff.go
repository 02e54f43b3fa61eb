package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/renameio/v2"
)

// handoffCmd asks a running `orchestrator serve` to hand off (SIGUSR2):
// it stops taking work, answers its calls in flight within
// runs.handoff_timeout, and exits without ending the runs' kept
// processes, which a Berth started on the same state directory takes
// back. It waits for that Berth to exit, so that what runs it next (a
// Kubernetes preStop hook, then the container's replacement; systemd's
// Restart=) starts the new one only once the old one let go.
func handoffCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("handoff", stderr)
	pid := fs.Int("pid", 0, "the pid of the serving Berth (1 in a container whose entrypoint it is)")
	pidFile := fs.String("pid-file", "", "a file serve --pid-file wrote, holding the serving Berth's pid")
	wait := fs.Duration("wait", 30*time.Second, "how long to wait for that Berth to exit (runs.handoff_timeout and a few seconds)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("handoff takes no arguments, got %q: name the Berth with --pid or --pid-file", fs.Args())
	}
	switch {
	case *pid == 0 && *pidFile == "":
		return errors.New("handoff: name the Berth to hand off with --pid PID or --pid-file FILE (serve --pid-file writes one)")
	case *pid != 0 && *pidFile != "":
		return errors.New("handoff: give --pid or --pid-file, not both")
	case *pidFile != "":
		b, err := os.ReadFile(*pidFile)
		if err != nil {
			return fmt.Errorf("handoff: %w (is Berth serving with --pid-file %s?)", err, *pidFile)
		}
		if *pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil || *pid <= 0 {
			return fmt.Errorf("handoff: %s holds %q, not a pid", *pidFile, bytes.TrimSpace(b))
		}
	case *pid < 0:
		return fmt.Errorf("handoff: --pid %d is not a pid", *pid)
	}
	// SIGUSR2 ends a process that does not handle it: make sure it is
	// a serving Berth, not a pid reused by another program.
	if err := isServe(*pid); err != nil {
		return fmt.Errorf("handoff: %w", err)
	}
	if err := syscall.Kill(*pid, syscall.SIGUSR2); err != nil {
		return fmt.Errorf("handoff: signalling pid %d: %w", *pid, err)
	}
	start := time.Now()
	for deadline := start.Add(*wait); alive(*pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("handoff: pid %d is still running %v after it was asked to hand off: its log says what it waits for (raise --wait past runs.handoff_timeout)", *pid, *wait)
		}
	}
	fmt.Fprintf(stdout, "pid %d handed off and exited in %v: start the new Berth on the same state directory\n", *pid, time.Since(start).Round(time.Millisecond))
	return nil
}

// isServe says why pid is not an `orchestrator serve`, or nil.
func isServe(pid int) error {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("no process has pid %d: is Berth running?", pid)
		}
		return fmt.Errorf("reading pid %d's command line: %w", pid, err)
	}
	argv := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	self := "orchestrator"
	if len(argv) < 2 || filepath.Base(argv[0]) != self || argv[1] != "serve" {
		return fmt.Errorf("pid %d is %q, not %s serve: name the serving Berth's pid", pid, strings.Join(argv, " "), self)
	}
	return nil
}

// alive says whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// pid (comm) S ...: the state follows the last ')'.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z' && b[i+2] != 'X'
	}
	return true
}

// writePidFile writes this process's pid to path, atomically, and
// returns what removes it (if it still holds this pid).
func writePidFile(path string) (remove func(), err error) {
	pid := strconv.Itoa(os.Getpid())
	if err := renameio.WriteFile(path, []byte(pid+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("--pid-file: %w", err)
	}
	return func() {
		if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) == pid {
			_ = os.Remove(path)
		}
	}, nil
}
