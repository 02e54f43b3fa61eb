package state

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
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
	bad := checkRun(r.Version, r.Run, r.Conversation, r.Workdir, r.Enclosure)
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
	runs, bad = readAll(s.runs, "a run", maxRun, func(r *Run, name string) error {
		if err := r.Check(); err != nil {
			return err
		}
		if runFile(r.Run) != name {
			return errors.New("its name is not its run id's")
		}
		return nil
	})
	sort.Slice(runs, func(i, j int) bool { return runs[i].Started.Before(runs[j].Started) })
	return runs, bad
}
