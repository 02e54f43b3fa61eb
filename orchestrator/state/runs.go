package state

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Run is one live run (issue 29 item 3): written at its run/start and
// removed when it ends, so that a Berth that comes back knows every run
// the one before had, those with no kept process too, and gives each
// back to a run/start with the same ids (resumed), its tools then saying
// what the restart lost instead of not knowing the ids they are asked
// about.
type Run struct {
	Version      int       `json:"version"`
	Run          string    `json:"run"`
	Conversation string    `json:"conversation"`
	Workdir      string    `json:"workdir"`
	Enclosure    Enclosure `json:"enclosure"`
	Started      time.Time `json:"started"`
}

// runsName is the runs' directory.
const runsName = "runs"

// maxRun bounds a run's file: its fields are bounded far below.
const maxRun = 16 << 10

// runFile is the file of run in runs/: a digest, so that no run id,
// whatever its bytes, names a path.
func runFile(run string) string {
	h := sha256.Sum256([]byte(run))
	return hex.EncodeToString(h[:20]) + ".json"
}

// Check says what is wrong with r, or nil.
func (r *Run) Check() error {
	var bad []string
	if r.Version != Version {
		bad = append(bad, fmt.Sprintf("version %d, not %d", r.Version, Version))
	}
	if r.Run == "" || !printable(r.Run, 256) {
		bad = append(bad, "no run id, or one that is not printable text of at most 256 bytes")
	}
	if !printable(r.Conversation, 256) {
		bad = append(bad, "a conversation id that is not printable text of at most 256 bytes")
	}
	if !filepath.IsAbs(r.Workdir) || !printable(r.Workdir, 4096) {
		bad = append(bad, "a workdir that is not an absolute path")
	}
	if !wordPattern.MatchString(r.Enclosure.Driver) || r.Enclosure.ID == "" || !printable(r.Enclosure.ID, 256) {
		bad = append(bad, "no enclosure driver and id")
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

// PutRun writes r, replacing the one of the same run id, atomically.
func (s *Store) PutRun(r Run) error {
	r.Version = Version
	if err := r.Check(); err != nil {
		return fmt.Errorf("state: run %.40q: %v", r.Run, err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := writeAtomic(s.runs, runFile(r.Run), b); err != nil {
		return fmt.Errorf("state: run %.40q: %w", r.Run, err)
	}
	return nil
}

// RemoveRun removes the run of id; one already gone is no error.
func (s *Store) RemoveRun(id string) error {
	if err := s.runs.Remove(runFile(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("state: removing run %.40q: %w", id, err)
	}
	return nil
}

// Runs reads every run, oldest first. A file that is no run Berth wrote
// is removed and reported in bad, with why: a run's file keeps no
// process, only the word that the run was there.
func (s *Store) Runs() (runs []Run, bad []error) {
	dir := filepath.Join(s.dir, runsName)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, []error{fmt.Errorf("state: reading %s: %w", dir, err)}
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue // a write in progress
		}
		r, err := s.readRun(name)
		if err != nil {
			bad = append(bad, fmt.Errorf("state: runs/%s is not a run Berth can use (%v): it is removed", name, err))
			_ = s.runs.Remove(name)
			continue
		}
		runs = append(runs, r)
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].Started.Before(runs[j].Started) })
	return runs, bad
}

// readRun reads and checks one run's file.
func (s *Store) readRun(name string) (Run, error) {
	var r Run
	b, err := readSafe(s.runs, name, "a run record", maxRun)
	if err != nil {
		return r, err
	}
	if err := decodeStrict(b, &r); err != nil {
		return r, fmt.Errorf("not a run: %v", err)
	}
	if err := r.Check(); err != nil {
		return r, err
	}
	if runFile(r.Run) != name {
		return r, errors.New("its name is not its run id's")
	}
	return r, nil
}
