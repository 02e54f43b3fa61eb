package state

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/renameio/v2"
	"golang.org/x/sys/unix"
)

// Call is one tools/call the harness gave a call id (issue 29 item 3):
// written before Berth dispatches it, and again with its outcome when it
// ends, so that a Berth that comes back knows which calls were in
// flight when the one before it went away, and never runs one twice.
type Call struct {
	Version int `json:"version"`
	// Run and ID are the run's id and the harness's call id: a call id
	// is the harness's within its run.
	Run string `json:"run"`
	ID  string `json:"id"`
	// Tool is the tool's name and Digest a digest of its name and
	// arguments: a call id sent again with other arguments is another
	// call.
	Tool   string `json:"tool"`
	Digest string `json:"digest"`
	// Started is when Berth dispatched it; Ended when it was answered.
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitzero"`
	// Outcome is "" while it runs, then CallOK, CallError or
	// CallUnknown.
	Outcome string `json:"outcome,omitempty"`
	// Answer is the answer's JSON (a result, or an error object when
	// Outcome is CallError), when it was small enough to keep
	// (MaxCallAnswer); else empty.
	Answer json.RawMessage `json:"answer,omitempty"`
}

// A call's outcomes.
const (
	CallOK    = "ok"    // answered with a result (isError or not)
	CallError = "error" // answered with a JSON-RPC error
	// CallUnknown: it was cut off (cancelled, or a handoff's bound
	// passed) while it ran; whether it took effect is not known.
	CallUnknown = "unknown"
)

// MaxCallAnswer bounds the answer a call's record keeps.
const MaxCallAnswer = 8 << 10

// maxCall bounds a call's file.
const maxCall = MaxCallAnswer + 8<<10

// callsName is the calls' directory.
const callsName = "calls"

// callFile is the file of the call id of run in calls/: a digest, so that
// no id, whatever its bytes, names a path.
func callFile(run, id string) string {
	h := sha256.Sum256([]byte(run + "\x00" + id))
	return hex.EncodeToString(h[:20]) + ".json"
}

// Check says what is wrong with c, or nil.
func (c *Call) Check() error {
	var bad []string
	if c.Version != Version {
		bad = append(bad, fmt.Sprintf("version %d, not %d", c.Version, Version))
	}
	if c.Run == "" || !printable(c.Run, 256) {
		bad = append(bad, "no run id, or one that is not printable text of at most 256 bytes")
	}
	if c.ID == "" || !printable(c.ID, 256) {
		bad = append(bad, "no call id, or one that is not printable text of at most 256 bytes")
	}
	if c.Tool == "" || !printable(c.Tool, 256) {
		bad = append(bad, "no tool")
	}
	switch c.Outcome {
	case "", CallOK, CallError, CallUnknown:
	default:
		bad = append(bad, fmt.Sprintf("outcome %.20q", c.Outcome))
	}
	if len(c.Answer) > MaxCallAnswer {
		bad = append(bad, "an answer over the size kept")
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

// PutCall writes c, replacing the one of the same run and id, atomically.
func (s *Store) PutCall(c Call) error {
	c.Version = Version
	if err := c.Check(); err != nil {
		return fmt.Errorf("state: call %.40q: %v", c.ID, err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := writeAtomic(s.calls, callFile(c.Run, c.ID), b); err != nil {
		return fmt.Errorf("state: call %.40q: %w", c.ID, err)
	}
	return nil
}

// writeAtomic writes b and a newline to name in root, mode 0600, by
// rename: a Berth that dies while writing leaves the old file or the new
// one, never half of one.
func writeAtomic(root *os.Root, name string, b []byte) error {
	f, err := renameio.NewPendingFile(name, renameio.WithRoot(root), renameio.WithStaticPermissions(0o600))
	if err != nil {
		return err
	}
	defer f.Cleanup()
	if _, err := f.Write(append(b, '\n')); err != nil {
		return err
	}
	return f.CloseAtomicallyReplace()
}

// decodeStrict decodes b, one JSON object with no field v lacks, into v.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more after the JSON object")
	}
	return nil
}

// RemoveCall removes the call id of run; one already gone is no error.
func (s *Store) RemoveCall(run, id string) error {
	if err := s.calls.Remove(callFile(run, id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("state: removing call %.40q: %w", id, err)
	}
	return nil
}

// Calls reads every call, oldest first. A file that is no call Berth
// wrote is removed and reported in bad, with why: calls expire anyway,
// and one that cannot be read can answer no retry.
func (s *Store) Calls() (calls []Call, bad []error) {
	calls, bad = readAll(s.calls, "a call", maxCall, func(c *Call, name string) error {
		if err := c.Check(); err != nil {
			return err
		}
		if callFile(c.Run, c.ID) != name {
			return errors.New("its name is not its run's and id's")
		}
		return nil
	})
	sort.Slice(calls, func(i, j int) bool { return calls[i].Started.Before(calls[j].Started) })
	return calls, bad
}

// readAll reads every file of root as a T (what, for errors: "a call")
// of at most max bytes, and checks it with verify, given its file's
// name. A file that is no T Berth wrote is removed and reported in bad,
// with why; the others are still read.
func readAll[T any](root *os.Root, what string, max int64, verify func(*T, string) error) (out []T, bad []error) {
	entries, err := fs.ReadDir(root.FS(), ".")
	if err != nil {
		return nil, []error{fmt.Errorf("state: reading %s: %w", root.Name(), err)}
	}
	name := filepath.Base(root.Name())
	for _, e := range entries {
		file := e.Name()
		if strings.HasPrefix(file, ".") {
			continue // a write in progress
		}
		var v T
		b, err := readSafe(root, file, what+" record", max)
		if err == nil {
			if err = decodeStrict(b, &v); err != nil {
				err = fmt.Errorf("not %s: %v", what, err)
			}
		}
		if err == nil {
			err = verify(&v, file)
		}
		if err != nil {
			bad = append(bad, fmt.Errorf("state: %s/%s is not %s Berth can use (%v): it is removed", name, file, what, err))
			_ = root.Remove(file)
			continue
		}
		out = append(out, v)
	}
	return out, bad
}

// readSafe reads a file of root that Berth wrote (what it is, for the
// error): a regular file of Berth's user, mode 0600 or tighter, at most
// max bytes; it never blocks (a FIFO is opened non-blocking and refused).
func readSafe(root *os.Root, name, what string, max int64) ([]byte, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, err
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, errors.New("not a regular file")
	case int(st.Uid) != os.Geteuid():
		return nil, fmt.Errorf("owned by uid %d, not Berth's %d", st.Uid, os.Geteuid())
	case st.Mode&0o077 != 0:
		return nil, fmt.Errorf("mode %04o lets others read it", st.Mode&0o777)
	case st.Size > max:
		return nil, fmt.Errorf("%d bytes, more than %s's %d", st.Size, what, max)
	}
	return io.ReadAll(io.LimitReader(f, max+1))
}
