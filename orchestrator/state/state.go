// Package state is Berth's state directory: what a Berth that starts
// after another one ended (an upgrade, a crash, an OOM kill) needs to
// find the processes the first one left to their relays, and nothing
// else. Each live process that asked to outlive Berth (enclosure.Keep)
// has one record, written atomically when it starts and removed when it
// ends.
//
// The directory holds:
//
//	lock              flock'd by the Berth that uses the directory; it
//	                  holds its pid while it lives, "handoff" once it
//	                  handed off, nothing once it stopped in order
//	records/TAG.json  one record per kept process (mode 0600)
//	relays/           the host relays' reattach sockets
//	calls/ID.json     the tools/call ids the harness gave (Call)
//	runs/ID.json      the live runs (Run)
//
// It is Berth's alone: mode 0700, owned by Berth's user; Open refuses any
// other. A record holds the token that lets a Berth back into its relay,
// so it never leaves this directory, and is never put on a command line
// or in an environment.
//
// It never starts, signals or reaches a process: reading a record only
// says where one may be.
package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-dev/berth/internal/errclass"
)

// The directory's parts.
const (
	lockName = "lock"
	// handoffNote is what a Berth that handed off leaves in the lock.
	handoffNote = "handoff"
	recordsName = "records"
	relaysName  = "relays"
)

// ErrInUse is Open's error when another live Berth holds the directory
// (class conflict).
var ErrInUse = errclass.Case("state directory in use", errclass.ErrConflict)

// ErrUnsafe is Open's error for a directory Berth must not trust: not a
// directory, another user's, or open to others, its mode not 0700
// (class permission).
var ErrUnsafe = errclass.Case("state directory unsafe", errclass.ErrPermission)

// Store is one state directory, locked by this Berth.
type Store struct {
	dir     string
	own     bool // made for this Berth alone (Default): removed at Close
	lock    *os.File
	records *os.Root
	calls   *os.Root
	runs    *os.Root
	// mu guards rewriting, the record files Rewrite keeps open by tag,
	// and closed (Close, HandOff: Rewrite refuses).
	mu        sync.Mutex
	rewriting map[string]*rewritten
	closed    bool
	// previous is how the Berth before ended (Previous).
	previous string
}

// How the Berth that held a directory before ended (Previous).
const (
	EndedHandoff = "handoff" // it handed off (serve's SIGUSR2)
	EndedCrash   = "crash"   // it went away without stopping (kill -9, an OOM kill, a crash)
)

// Open opens dir, the state directory an operator named (--state-dir,
// state.dir), making it (mode 0700) when it does not exist. A directory
// that exists must be a directory owned by Berth's user with mode 0700,
// else an error wrapping ErrUnsafe says what to fix. A second live Berth
// on the same directory is refused with an error wrapping ErrInUse: two
// Berths would each take the other's processes for their own.
func Open(dir string) (*Store, error) {
	if !filepath.IsAbs(dir) {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, fmt.Errorf("state directory %s: %w", dir, err)
		}
		dir = abs
	}
	dir = filepath.Clean(dir)
	if err := makeDir(dir); err != nil {
		return nil, err
	}
	return open(dir, false)
}

// Default makes a state directory of this Berth's own, under base
// (DefaultBase), so that Berths started side by side (a harness's
// `serve --stdio` children, test suites) never share one. A new Berth
// given its path with --state-dir, after this one ended without an
// orderly stop, finds what it left. Close removes it.
func Default(base string) (*Store, error) {
	if err := makeDir(base); err != nil {
		return nil, err
	}
	sweep(base)
	dir, err := os.MkdirTemp(base, "berth-"+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, fmt.Errorf("state directory under %s: %w", base, err)
	}
	s, err := open(dir, true)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// staleAfter is how long the records of a directory Default made, whose
// Berth is gone, are kept for a Berth given its path: far past any relay's
// grace (enclosure.reattach_grace), after which no process is held.
const staleAfter = 24 * time.Hour

// sweep removes, under base, the directories Default made for Berths that
// are gone (their lock is free: a Berth killed without an orderly stop
// leaves its directory), when no record is left in them or every record
// is older than staleAfter. Each Berth's start sweeps, so that the
// directories of killed Berths do not pile up; a directory a live Berth
// holds, or one whose records a Berth may still take back, stays.
func sweep(base string) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "berth-") {
			continue
		}
		dir := filepath.Join(base, e.Name())
		lock, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // not a state directory (or not ours to judge)
		}
		if unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil && stale(dir) {
			os.RemoveAll(dir)
		}
		lock.Close()
	}
}

// stale says whether no record and no run in dir is younger than
// staleAfter: what Close keeps a directory for, a sweep keeps it for a
// day.
func stale(dir string) bool {
	for _, sub := range []string{recordsName, runsName} {
		entries, err := os.ReadDir(filepath.Join(dir, sub))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return false
		}
		for _, e := range entries {
			if info, err := e.Info(); err != nil || time.Since(info.ModTime()) < staleAfter {
				return false
			}
		}
	}
	return true
}

// DefaultBase is where Default makes its directories:
// $XDG_RUNTIME_DIR/berth/state, else ~/.local/state/berth, else a
// directory of the user's in the system's temporary directory.
func DefaultBase() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		return filepath.Join(d, "berth", "state")
	}
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "berth")
	}
	if home, err := os.UserHomeDir(); err == nil && filepath.IsAbs(home) {
		return filepath.Join(home, ".local", "state", "berth")
	}
	return filepath.Join(os.TempDir(), "berth-state-"+strconv.Itoa(os.Geteuid()))
}

// makeDir makes dir with mode 0700 (its missing parents 0755, as
// mkdir -p with a umask of 022), or checks the one there: a directory,
// Berth's user's, mode 0700.
func makeDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	if err := os.Mkdir(dir, 0o700); err == nil {
		// The umask may have taken bits off; never added any.
		return os.Chmod(dir, 0o700)
	} else if !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	return checkDir(dir)
}

// checkDir says why dir is no state directory Berth may use.
func checkDir(dir string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return fmt.Errorf("state directory %s is a symbolic link: name the directory itself: %w", dir, ErrUnsafe)
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("state directory %s is not a directory: name a directory, or a path to make one at: %w", dir, ErrUnsafe)
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("state directory %s belongs to uid %d, not Berth's uid %d: give Berth a directory of its own user: %w", dir, st.Uid, os.Geteuid(), ErrUnsafe)
	case st.Mode&0o777 != 0o700:
		return fmt.Errorf("state directory %s has mode %04o, not 0700: its records hold the tokens that reach Berth's processes (chmod 700 %s): %w", dir, st.Mode&0o777, dir, ErrUnsafe)
	}
	return nil
}

func open(dir string, own bool) (*Store, error) {
	lock, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state directory %s: its lock: %w", dir, err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder := lockHolder(lock)
		lock.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("state directory %s is held by another live Berth%s: stop it first, or give this one another --state-dir: %w", dir, holder, ErrInUse)
		}
		return nil, fmt.Errorf("state directory %s: locking it: %w", dir, err)
	}
	previous := lockNote(lock)
	// The holder's pid, for the error a second Berth gets.
	if err := lock.Truncate(0); err == nil {
		_, _ = lock.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	s := &Store{dir: dir, own: own, lock: lock, previous: previous, rewriting: map[string]*rewritten{}}
	for _, sub := range []string{recordsName, relaysName, callsName, runsName} {
		if err := makeDir(filepath.Join(dir, sub)); err != nil {
			s.Close()
			return nil, err
		}
	}
	if s.records, err = os.OpenRoot(filepath.Join(dir, recordsName)); err != nil {
		s.Close()
		return nil, fmt.Errorf("state directory %s: %w", dir, err)
	}
	if s.calls, err = os.OpenRoot(filepath.Join(dir, callsName)); err != nil {
		s.Close()
		return nil, fmt.Errorf("state directory %s: %w", dir, err)
	}
	if s.runs, err = os.OpenRoot(filepath.Join(dir, runsName)); err != nil {
		s.Close()
		return nil, fmt.Errorf("state directory %s: %w", dir, err)
	}
	return s, nil
}

// lockNote is how the lock's last holder ended, from what it left in the
// lock: its pid (it never stopped: EndedCrash), the handoff note
// (EndedHandoff), or nothing (it stopped in order, or there was none).
func lockNote(lock *os.File) string {
	b := make([]byte, 16)
	n, _ := lock.ReadAt(b, 0)
	switch note := strings.TrimSpace(string(b[:n])); {
	case note == handoffNote:
		return EndedHandoff
	case note != "":
		return EndedCrash
	}
	return ""
}

// Previous is how the Berth that held the directory before this one
// ended: EndedHandoff, EndedCrash, or "" (none did, or it stopped in
// order).
func (s *Store) Previous() string { return s.previous }

// lockHolder is " (pid N)" from the lock file, or "".
func lockHolder(lock *os.File) string {
	b := make([]byte, 16)
	n, _ := lock.ReadAt(b, 0)
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n]))); err == nil && pid > 0 {
		return fmt.Sprintf(" (pid %d)", pid)
	}
	return ""
}

// Dir is the directory.
func (s *Store) Dir() string { return s.dir }

// Own says whether the directory was made for this Berth alone
// (Default).
func (s *Store) Own() bool { return s.own }

// RelayDir is where relays on the host listen for a Berth that comes
// back: inside the state directory, never a workdir.
func (s *Store) RelayDir() string { return filepath.Join(s.dir, relaysName) }

// Close releases the directory for another Berth. A directory of this
// Berth's own (Default) is removed when no record and no run is left in
// it: records left are processes held by their relays, and runs left are
// runs a Berth given the directory can still resume (a sweep keeps such
// a directory for a day).
func (s *Store) Close() error { return s.close("") }

// HandOff releases the directory as Close does, noting that this Berth
// handed off (Previous, for the Berth that comes next).
func (s *Store) HandOff() error { return s.close(handoffNote) }

// close releases the directory, leaving note in the lock.
func (s *Store) close(note string) error {
	if err := s.lock.Truncate(0); err == nil && note != "" {
		_, _ = s.lock.WriteAt([]byte(note+"\n"), 0)
	}
	s.mu.Lock()
	s.closed = true
	for tag := range s.rewriting {
		s.unkeep(tag)
	}
	s.mu.Unlock()
	if s.records != nil {
		s.records.Close()
	}
	if s.calls != nil {
		s.calls.Close()
	}
	if s.runs != nil {
		s.runs.Close()
	}
	if s.own {
		records, _ := os.ReadDir(filepath.Join(s.dir, recordsName))
		runs, _ := os.ReadDir(filepath.Join(s.dir, runsName))
		if len(records) == 0 && len(runs) == 0 {
			os.RemoveAll(s.dir)
		}
	}
	return s.lock.Close() // the flock goes with it
}
