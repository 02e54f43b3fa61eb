package state

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A run is written with mode 0600 under a name that is a digest of its
// id (an id of any bytes names no path), read back as written and
// removed (twice is no error); a file in runs/ that is no run (garbage,
// misnamed, over maxRun) is reported with why and removed, and the
// others are still read.
//
// Issue 29 item 3 (runs with no kept process).
func TestRunsRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := Run{Run: "../../etc/passwd", Conversation: "conv", Workdir: "/work/x", Enclosure: Enclosure{Driver: "docker", ID: "c1"}, Started: time.Unix(1700000000, 0).UTC()}
	if err := s.PutRun(r); err != nil {
		t.Fatal(err)
	}
	other := r
	other.Run, other.Started = "run-2", r.Started.Add(time.Second)
	if err := s.PutRun(other); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "runs", "*.json"))
	if len(files) != 2 {
		t.Fatalf("runs/ holds %v, want two files", files)
	}
	for _, f := range files {
		if st, _ := os.Stat(f); st.Mode().Perm() != 0o600 || strings.Contains(filepath.Base(f), "passwd") {
			t.Fatalf("a run's file %s, mode %v", f, st.Mode())
		}
	}
	for name, body := range map[string]string{
		"garbage.json": "{not json",
		"0000000000000000000000000000000000000000.json": `{"version":1,"run":"x","conversation":"","workdir":"/w","enclosure":{"driver":"host","id":"local"},"started":"2024-01-01T00:00:00Z"}`,
		runFile("big"): `{"version":1,"run":"big","conversation":"` + strings.Repeat("c", maxRun) + `"}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, "runs", name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	runs, bad := s.Runs()
	if len(runs) != 2 || runs[0].Run != r.Run || runs[1].Run != "run-2" || runs[0].Workdir != "/work/x" || runs[0].Enclosure != r.Enclosure {
		t.Fatalf("runs read back: %+v", runs)
	}
	if len(bad) != 3 {
		t.Fatalf("bad files: %v, want the garbage, the misnamed one and the one over maxRun", bad)
	}
	for _, err := range bad {
		if !strings.Contains(err.Error(), "is not a run Berth can use") {
			t.Errorf("bad file's error: %v", err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "runs", "*.json")); len(left) != 2 {
		t.Errorf("runs/ after the read: %v, want the bad files removed", left)
	}
	if err := s.RemoveRun(r.Run); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveRun(r.Run); err != nil {
		t.Fatalf("removing a run already gone: %v", err)
	}
	if runs, _ := s.Runs(); len(runs) != 1 || runs[0].Run != "run-2" {
		t.Fatalf("runs after the removal: %+v", runs)
	}
	if err := s.PutRun(Run{Run: "r", Workdir: "relative", Enclosure: Enclosure{Driver: "host", ID: "local"}}); err == nil {
		t.Error("a run with a relative workdir was written")
	}
}
