package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Version is the records' format; a record of another is refused.
const Version = 1

// Record is what a Berth that comes back needs to find one kept process
// and give it back to its run.
type Record struct {
	Version int `json:"version"`
	// Run, Conversation and Workdir are the run's: a run/start that
	// resumes it must name the same.
	Run          string `json:"run"`
	Conversation string `json:"conversation,omitempty"`
	Workdir      string `json:"workdir"`
	// Enclosure is where the process runs.
	Enclosure Enclosure `json:"enclosure"`
	// Relay is how to reach the relay that holds it.
	Relay Relay `json:"relay"`
	// Kind is the family that started it (kernel, lsp, debug, worker) and
	// Role what it is to that family (a kernel's language, a server's
	// name): what a Berth that comes back does with it.
	Kind string `json:"kind"`
	Role string `json:"role,omitempty"`
	// Started is when it started.
	Started time.Time `json:"started"`
	// Data is what its family keeps to give it back (a debug session's
	// program, launch time, breakpoints and stop): a JSON object of at
	// most MaxData bytes, which only the family reads. A Berth before
	// this field refuses a record that has it.
	Data json.RawMessage `json:"data,omitempty"`
}

// MaxData bounds a record's Data.
const MaxData = 32 << 10

// Enclosure names an enclosure as run/start does.
type Enclosure struct {
	Driver string `json:"driver"`
	ID     string `json:"id"`
}

// Relay is one relay that holds a process.
type Relay struct {
	// Tag names the relay (berth-relay run --tag) and the record.
	Tag string `json:"tag"`
	// Socket is where it listens for a Berth that comes back, as its
	// enclosure sees it.
	Socket string `json:"socket"`
	// Token is what that Berth says first; the relay refuses any other.
	Token string `json:"token"`
	// Pid is the process's pid as Berth saw it at its start (0:
	// unknown): on the host the program's, in a container its relay's
	// as the engine reports it. For an operator's eyes: a Berth that
	// comes back finds the process by its socket and token alone.
	Pid int `json:"pid,omitempty"`
}

// maxRecord bounds a record file: one is a few hundred bytes.
const maxRecord = 64 << 10

var (
	tagPattern   = regexp.MustCompile(`^berth-[0-9a-f]{24}$`)
	tokenPattern = regexp.MustCompile(`^[0-9a-f]{32,128}$`)
	wordPattern  = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)
)

// Check says what is wrong with r, or nil.
func (r *Record) Check() error {
	bad := checkRun(r.Version, r.Run, r.Conversation, r.Workdir, r.Enclosure)
	if !tagPattern.MatchString(r.Relay.Tag) {
		bad = append(bad, fmt.Sprintf("relay tag %.40q, not berth- and 24 hex digits", r.Relay.Tag))
	}
	if !strings.HasPrefix(r.Relay.Socket, "/") || !printable(r.Relay.Socket, 4096) {
		bad = append(bad, "a relay socket that is not an absolute path")
	}
	if !tokenPattern.MatchString(r.Relay.Token) {
		bad = append(bad, "a relay token that is not 32 to 128 hex digits")
	}
	if r.Relay.Pid < 0 {
		bad = append(bad, "a negative pid")
	}
	if !wordPattern.MatchString(r.Kind) {
		bad = append(bad, fmt.Sprintf("kind %.40q, not a lower-case word", r.Kind))
	}
	if !printable(r.Role, 256) {
		bad = append(bad, "a role that is not printable text of at most 256 bytes")
	}
	if len(r.Data) > 0 {
		var obj map[string]json.RawMessage
		if len(r.Data) > MaxData || json.Unmarshal(r.Data, &obj) != nil || obj == nil {
			bad = append(bad, fmt.Sprintf("data that is not a JSON object of at most %d bytes", MaxData))
		}
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

// checkRun lists what is wrong with the fields a record and a run share:
// the format's version, the run's ids, its workdir and its enclosure.
func checkRun(version int, run, conversation, workdir string, enc Enclosure) []string {
	var bad []string
	if version != Version {
		bad = append(bad, fmt.Sprintf("version %d, not %d", version, Version))
	}
	if run == "" || !printable(run, 256) {
		bad = append(bad, "no run id, or one that is not printable text of at most 256 bytes")
	}
	if !printable(conversation, 256) {
		bad = append(bad, "a conversation id that is not printable text of at most 256 bytes")
	}
	if !filepath.IsAbs(workdir) || !printable(workdir, 4096) {
		bad = append(bad, "a workdir that is not an absolute path")
	}
	if !wordPattern.MatchString(enc.Driver) || enc.ID == "" || !printable(enc.ID, 256) {
		bad = append(bad, "no enclosure driver and id")
	}
	return bad
}

// printable: at most max bytes of UTF-8 with no control character.
func printable(s string, max int) bool {
	if len(s) > max {
		return false
	}
	for _, c := range s {
		if c < 0x20 || c == 0x7f || c == 0xfffd {
			return false
		}
	}
	return true
}

// fileName is the record's file in records/.
func fileName(tag string) string { return tag + ".json" }

// Put writes r, replacing the record of the same tag, atomically: a
// Berth that dies while writing leaves the old record or the new one,
// never half of one. It waits for the disk (fsync), outside the lock
// Rewrite takes: a tag's Put comes before its process is recorded as
// live, so no Rewrite of the same tag runs beside it.
func (s *Store) Put(r Record) error {
	b, err := encode(r)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.unkeep(r.Relay.Tag)
	s.mu.Unlock()
	if err := writeAtomic(s.records, fileName(r.Relay.Tag), b); err != nil {
		return fmt.Errorf("state: record of %s: %w", r.Relay.Tag, err)
	}
	return nil
}

// Rewrite replaces the record of the same tag, which Put wrote first, in
// place and without waiting for the disk (no fsync): it is for what a
// record comes to say while its process runs (a family's Note), often on
// a call's way (a language server's first open of a document, which the
// record lists before the server hears of it). A new file renamed over
// the record, as Put writes it, cost 0.2 ms in a loop here and up to 0.5
// ms on a call's way; three writes to a file kept open cost about 10 µs
// (a rewrite of a 6 KB record: 60 µs, most of it encoding).
//
// The record is never read half-written as a record: its first byte is
// overwritten first with one that makes it no JSON, then the rest, then
// the first byte again ('{'); the file is padded with spaces to its old
// length, so it is never truncated. A Berth that dies during a rewrite
// leaves the old record (before the first write) or a file that is
// refused when read, whose process its relay ends after the grace: a
// process is never taken back on a record that says less than it was
// told, since the family's next step waits for the rewrite. A crash of the
// machine can leave pages of both, which is refused too but for edits of
// the same length on different pages; the whole record was last synced
// by Put. After Close or HandOff it refuses: the directory is the next
// Berth's.
func (s *Store) Rewrite(r Record) error {
	b, err := encode(r)
	if err != nil {
		return err
	}
	tag := r.Relay.Tag
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("state: record of %s: the state directory was released (Close, HandOff)", tag)
	}
	f, ok := s.rewriting[tag]
	if !ok {
		file, err := s.records.OpenFile(fileName(tag), os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("state: record of %s: %w", tag, err)
		}
		st, err := file.Stat()
		if err == nil && !st.Mode().IsRegular() {
			err = fmt.Errorf("it is a %s, not the file Put wrote", st.Mode().Type())
		}
		if err != nil {
			file.Close()
			return fmt.Errorf("state: record of %s: %w", tag, err)
		}
		f = &rewritten{file: file, size: st.Size()}
		s.rewriting[tag] = f
	}
	if err := f.rewrite(b); err != nil {
		f.file.Close()
		delete(s.rewriting, tag)
		return fmt.Errorf("state: record of %s: %w", tag, err)
	}
	return nil
}

// rewritten is a record file Rewrite keeps open, and its length.
type rewritten struct {
	file *os.File
	size int64
}

// rewrite writes b and a newline over the file, padded with spaces to
// its length: '!' over the first byte, then all but the first byte, then
// the first byte.
func (f *rewritten) rewrite(b []byte) error {
	buf := make([]byte, max(int64(len(b))+1, f.size))
	copy(buf, b)
	for i := len(b); i < len(buf)-1; i++ {
		buf[i] = ' '
	}
	buf[len(buf)-1] = '\n'
	if _, err := f.file.WriteAt([]byte{'!'}, 0); err != nil {
		return err
	}
	if _, err := f.file.WriteAt(buf[1:], 1); err != nil {
		return err
	}
	if _, err := f.file.WriteAt(buf[:1], 0); err != nil {
		return err
	}
	f.size = int64(len(buf))
	return nil
}

// unkeep closes the file Rewrite keeps open for tag, before the record
// is replaced whole (Put) or removed. Called with mu.
func (s *Store) unkeep(tag string) {
	if f, ok := s.rewriting[tag]; ok {
		f.file.Close()
		delete(s.rewriting, tag)
	}
}

// encode checks r and encodes it as a record file holds it.
func encode(r Record) ([]byte, error) {
	r.Version = Version
	if err := r.Check(); err != nil {
		return nil, fmt.Errorf("state: record of %s: %v", r.Relay.Tag, err)
	}
	return json.MarshalIndent(r, "", "  ")
}

// Remove removes the record of tag; one already gone is no error.
func (s *Store) Remove(tag string) error {
	if !tagPattern.MatchString(tag) {
		return fmt.Errorf("state: %q is no relay tag", tag)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unkeep(tag)
	if err := s.records.Remove(fileName(tag)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("state: removing the record of %s: %w", tag, err)
	}
	return nil
}

// BadRecord is a file in records/ that is no record Berth wrote: garbage,
// a record of another format, or something another user put there.
type BadRecord struct {
	Name   string // the file's name in records/
	Reason string
}

func (b *BadRecord) Error() string {
	return fmt.Sprintf("state: %s is not a record Berth can use (%s): it is ignored; remove it", b.Name, b.Reason)
}

// Records reads every record, sorted by tag. A file that is no valid
// record (not a regular file of Berth's user with mode 0600, too large,
// not JSON of the record's form, or a record whose fields do not check)
// is left out and reported in bad, each naming the file and what is
// wrong; none stops the others being read, and nothing in a file can
// make the read block (a FIFO is opened non-blocking and refused).
func (s *Store) Records() (records []Record, bad []error) {
	dir := filepath.Join(s.dir, recordsName)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, []error{fmt.Errorf("state: reading %s: %w", dir, err)}
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue // a write in progress (renameio's temporary file)
		}
		r, err := s.read(name)
		if err != nil {
			bad = append(bad, &BadRecord{Name: name, Reason: err.Error()})
			continue
		}
		records = append(records, r)
	}
	sort.Slice(records, func(i, j int) bool { return records[i].Relay.Tag < records[j].Relay.Tag })
	return records, bad
}

// read reads and checks one record file.
func (s *Store) read(name string) (Record, error) {
	var r Record
	tag, ok := strings.CutSuffix(name, ".json")
	if !ok || !tagPattern.MatchString(tag) {
		return r, errors.New("its name is not a relay tag and .json")
	}
	b, err := readSafe(s.records, name, "a record", maxRecord)
	if err != nil {
		return r, err
	}
	if len(b) > 0 && b[0] == '!' {
		return r, errors.New("a rewrite of it was cut short (the Berth making it went away): its process is not taken back, and its relay ends it after the grace")
	}
	if err := decodeStrict(b, &r); err != nil {
		return r, fmt.Errorf("not a record: %v", err)
	}
	if err := r.Check(); err != nil {
		return r, err
	}
	if r.Relay.Tag != tag {
		return r, fmt.Errorf("it names relay %s, not its own %s", r.Relay.Tag, tag)
	}
	return r, nil
}
