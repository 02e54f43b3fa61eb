package state

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A call is written with mode 0600 under a name that is a digest of its
// run and id (an id of any bytes names no path), read back as written,
// replaced with its outcome and removed; a file in calls/ that is no
// call is reported with why and removed.
//
// Issue 29 item 3.
func TestCallsRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := Call{Run: "run-1", ID: "../../etc/passwd", Tool: "eval", Digest: "d1", Started: time.Unix(1700000000, 0).UTC()}
	if err := s.PutCall(c); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "calls", "*.json"))
	if len(files) != 1 {
		t.Fatalf("calls/ holds %v, want one file", files)
	}
	if st, _ := os.Stat(files[0]); st.Mode().Perm() != 0o600 || strings.Contains(filepath.Base(files[0]), "passwd") {
		t.Fatalf("the call's file %s, mode %v", files[0], st.Mode())
	}
	c.Outcome, c.Ended, c.Answer = CallOK, c.Started.Add(time.Second), json.RawMessage(`{"content":[],"isError":false}`)
	if err := s.PutCall(c); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "calls", "garbage.json"), []byte("{"), 0o600)
	syscall.Mkfifo(filepath.Join(dir, "calls", "fifo.json"), 0o600)
	got, bad := s.Calls()
	c.Version = Version
	if len(got) != 1 || got[0].ID != c.ID || got[0].Outcome != CallOK || string(got[0].Answer) != string(c.Answer) || !got[0].Ended.Equal(c.Ended) {
		t.Fatalf("Calls() = %+v, want %+v", got, c)
	}
	if len(bad) != 2 || !strings.Contains(bad[0].Error()+bad[1].Error(), "not a regular file") {
		t.Fatalf("bad = %v, want the garbage and the FIFO named", bad)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "calls", "*")); len(left) != 1 {
		t.Fatalf("calls/ holds %v after the read, want the call alone", left)
	}
	if err := s.PutCall(Call{Run: "run-1", ID: "bad\nid", Tool: "eval"}); err == nil {
		t.Fatal("a call id with a newline was written")
	}
	if err := s.RemoveCall(c.Run, c.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Calls(); len(got) != 0 {
		t.Fatalf("Calls() after RemoveCall = %+v", got)
	}
}

// The lock says how the Berth before ended: nothing after an orderly
// stop, a handoff after HandOff, a crash when it was left holding it
// (its pid still there).
//
// Issue 29 item 5.
func TestPreviousSaysHowTheBerthBeforeEnded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	open := func() *Store {
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	if s.Previous() != "" {
		t.Fatalf("a new directory's Previous() = %q", s.Previous())
	}
	s.Close()
	s = open()
	if s.Previous() != "" {
		t.Fatalf("after an orderly stop, Previous() = %q", s.Previous())
	}
	s.HandOff()
	s = open()
	if s.Previous() != EndedHandoff {
		t.Fatalf("after a handoff, Previous() = %q", s.Previous())
	}
	// A Berth killed leaves its pid; the flock goes with its process.
	s.lock.Close()
	s = open()
	defer s.Close()
	if s.Previous() != EndedCrash {
		t.Fatalf("after a crash, Previous() = %q", s.Previous())
	}
}
