package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

func record(tag string) Record {
	return Record{
		Version: Version, Run: "run-1", Conversation: "conv-1", Workdir: "/src/app",
		Enclosure: Enclosure{Driver: "host", ID: "local"},
		Relay:     Relay{Tag: tag, Socket: "/state/relays/" + tag + ".sock", Token: strings.Repeat("ab", 16), Pid: 42},
		Kind:      "kernel", Role: "python", Started: time.Unix(1700000000, 0).UTC(),
	}
}

const tag1 = "berth-0123456789abcdef01234567"

// Records are written atomically with mode 0600, read back as written,
// and removed; the directory is 0700 and its records/ too.
//
// Issue 29 item 1.
func TestRecordsRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, d := range []string{dir, filepath.Join(dir, "records"), s.RelayDir()} {
		if st, err := os.Stat(d); err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, %v; want a directory of mode 0700", d, st.Mode(), err)
		}
	}
	want := record(tag1)
	if err := s.Put(want); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, "records", tag1+".json"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the record file: %v, %v; want mode 0600", st.Mode(), err)
	}
	want.Run, want.Version = "run-2", Version // replaced whole
	if err := s.Put(want); err != nil {
		t.Fatal(err)
	}
	got, bad := s.Records()
	if len(bad) != 0 || len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Fatalf("Records() = %+v, %v; want %+v", got, bad, want)
	}
	if err := s.Remove(tag1); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(tag1); err != nil {
		t.Errorf("removing a removed record: %v", err)
	}
	if got, bad := s.Records(); len(got)+len(bad) != 0 {
		t.Errorf("after Remove: %v, %v", got, bad)
	}
	bad1 := record("../../etc/x")
	if err := s.Put(bad1); err == nil {
		t.Error("Put of a record with a tag that is a path: nil error")
	}
}

// A record keeps its family's data, a JSON object, as written; data
// that is not an object, or over MaxData, is refused at Put and when
// read.
//
// Issue 29 item 3 (debug sessions).
func TestRecordKeepsItsFamilysData(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := record(tag1)
	want.Kind, want.Role = "debug", "debugpy"
	want.Data = json.RawMessage(`{"program":"app.py","breakpoints":{"/src/app/app.py":[3]}}`)
	if err := s.Put(want); err != nil {
		t.Fatal(err)
	}
	got, bad := s.Records()
	if len(bad) != 0 || len(got) != 1 {
		t.Fatalf("Records() = %+v, %v", got, bad)
	}
	var back, sent any
	_ = json.Unmarshal(got[0].Data, &back)
	_ = json.Unmarshal(want.Data, &sent)
	if !reflect.DeepEqual(back, sent) {
		t.Errorf("data read back %s, want %s", got[0].Data, want.Data)
	}
	for _, d := range []string{`[1]`, `"text"`, `null`, `{"a":"` + strings.Repeat("x", MaxData) + `"}`} {
		r := record(tag1)
		r.Data = json.RawMessage(d)
		if err := s.Put(r); err == nil || !strings.Contains(err.Error(), "JSON object") {
			t.Errorf("Put with data %.20s: %v, want a refusal", d, err)
		}
	}
	// Written by hand: read and refused.
	r := record(tag1)
	r.Data = json.RawMessage(`[1]`)
	b, _ := json.Marshal(r)
	if err := os.WriteFile(filepath.Join(dir, "records", tag1+".json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, bad := s.Records(); len(got) != 0 || len(bad) != 1 || !strings.Contains(bad[0].Error(), "JSON object") {
		t.Errorf("a record with data not an object: %+v, %v", got, bad)
	}
}

// A second live Berth on the same directory is refused, naming the
// holder; once the first closes it, it may have it.
//
// Issue 29 item 1.
func TestSecondBerthOnTheDirectoryIsRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	first, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir)
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "another live Berth") {
		t.Fatalf("a second Open = %v, want ErrInUse saying another Berth holds it", err)
	}
	first.Close()
	second, err := Open(dir)
	if err != nil {
		t.Fatalf("Open after the first closed: %v", err)
	}
	second.Close()
}

// A directory with another mode, a file, or a symlink is refused with
// what to fix.
//
// Issue 29 item 1.
func TestUnsafeDirectoriesAreRefused(t *testing.T) {
	base := t.TempDir()
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o755)
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o600)
	link := filepath.Join(base, "link")
	private := filepath.Join(base, "private")
	os.Mkdir(private, 0o700)
	os.Symlink(private, link)
	for _, c := range []struct{ dir, says string }{
		{open, "mode 0755, not 0700"},
		{file, "not a directory"},
		{link, "symbolic link"},
	} {
		if _, err := Open(c.dir); !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("Open(%s) = %v, want ErrUnsafe saying %q", c.dir, err, c.says)
		}
	}
	if os.Geteuid() == 0 {
		other := filepath.Join(base, "other")
		os.Mkdir(other, 0o700)
		os.Chown(other, 65534, 65534)
		if _, err := Open(other); !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "belongs to uid 65534") {
			t.Errorf("Open(another user's directory) = %v, want ErrUnsafe naming its owner", err)
		}
	}
}

// Each Berth's default directory is its own, and goes at Close when it
// holds no record; one that does is left for a Berth given its path.
//
// Issue 29 item 1.
func TestDefaultDirectoriesAreEachBerthsOwn(t *testing.T) {
	base := filepath.Join(t.TempDir(), "berth", "state")
	a, err := Default(base)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Default(base)
	if err != nil {
		t.Fatal(err)
	}
	if a.Dir() == b.Dir() || !a.Own() {
		t.Fatalf("two defaults share %s", a.Dir())
	}
	if st, err := os.Stat(base); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("the base: %v, %v; want mode 0700", st, err)
	}
	a.Close()
	if _, err := os.Stat(a.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an empty default directory outlived its Berth: %v", err)
	}
	if err := b.Put(record(tag1)); err != nil {
		t.Fatal(err)
	}
	b.Close()
	again, err := Open(b.Dir())
	if err != nil {
		t.Fatalf("a Berth given the default directory of one that ended: %v", err)
	}
	defer again.Close()
	if got, _ := again.Records(); len(got) != 1 {
		t.Errorf("its records: %v", got)
	}
}

// A default base that cannot be written (a read-only root) is an error
// Berth logs once before running without survival.
//
// Issue 29 item 1.
func TestDefaultInAReadOnlyPlaceFails(t *testing.T) {
	if os.Geteuid() == 0 {
		ro := t.TempDir()
		// root writes through mode bits: a read-only bind would do, but
		// a file where a directory must be fails as well for root.
		blocker := filepath.Join(ro, "blocker")
		os.WriteFile(blocker, nil, 0o600)
		if _, err := Default(filepath.Join(blocker, "state")); err == nil {
			t.Fatal("Default under a file: nil error")
		}
		return
	}
	ro := t.TempDir()
	os.Chmod(ro, 0o500)
	t.Cleanup(func() { os.Chmod(ro, 0o700) })
	if _, err := Default(filepath.Join(ro, "state")); err == nil {
		t.Fatal("Default in a read-only directory: nil error")
	}
}

// Garbage and hostile files in records/ are reported, each naming the
// file and why, and leave the good records readable; none blocks the
// read (a FIFO) or is followed (a symlink).
//
// Issue 29 item 1.
func TestGarbageAndHostileRecordsAreReportedNotUsed(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Put(record(tag1)); err != nil {
		t.Fatal(err)
	}
	recs := filepath.Join(s.Dir(), "records")
	write := func(name, body string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(recs, name), []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(recs, name), mode)
	}
	tag := func(i int) string { return fmt.Sprintf("berth-%024x", i) }
	good := func(t string) Record { return record(t) }
	wrongTag := good(tag(1))
	wrongTag.Relay.Tag = tag1
	badToken := good(tag(2))
	badToken.Relay.Token = "secret"
	badSocket := good(tag(3))
	badSocket.Relay.Socket = "relative.sock"
	newer := good(tag(4))
	newer.Version = 2
	control := good(tag(5))
	control.Run = "run\x1b[2J"
	cases := map[string]string{
		tag(0) + ".json": "not json at all",
		tag(1) + ".json": mustJSON(t, wrongTag),
		tag(2) + ".json": mustJSON(t, badToken),
		tag(3) + ".json": mustJSON(t, badSocket),
		tag(4) + ".json": mustJSON(t, newer),
		tag(5) + ".json": mustJSON(t, control),
		tag(6) + ".json": `{"version":1,"unknown":true}`,
		"notes.txt":      "hello",
		tag(7) + ".json": mustJSON(t, good(tag(7))) + "{}",
	}
	for name, body := range cases {
		write(name, body, 0o600)
	}
	write(tag(8)+".json", mustJSON(t, good(tag(8))), 0o644)
	write(tag(9)+".json", strings.Repeat(" ", maxRecord+1), 0o600)
	if err := syscall.Mkfifo(filepath.Join(recs, tag(10)+".json"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Symlink(filepath.Join(s.Dir(), "lock"), filepath.Join(recs, tag(11)+".json"))

	done := make(chan struct{})
	var got []Record
	var bad []error
	go func() { got, bad = s.Records(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Records blocked")
	}
	if len(got) != 1 || got[0].Relay.Tag != tag1 {
		t.Errorf("good records: %+v, want only %s", got, tag1)
	}
	says := map[string]string{
		tag(0):  "not a record",
		tag(1):  "not its own",
		tag(2):  "relay token",
		tag(3):  "relay socket",
		tag(4):  "version 2",
		tag(5):  "run id",
		tag(6):  "unknown field",
		"notes": "not a relay tag",
		tag(7):  "more after",
		tag(8):  "mode 0644",
		tag(9):  "more than a record",
		tag(10): "not a regular file",
		tag(11): "", // a symlink: refused, whatever the system's words
	}
	if len(bad) != len(says) {
		t.Errorf("%d bad records reported, want %d: %v", len(bad), len(says), bad)
	}
	for _, err := range bad {
		var br *BadRecord
		if !errors.As(err, &br) {
			t.Errorf("%v is not a BadRecord", err)
			continue
		}
		key := strings.TrimSuffix(strings.TrimSuffix(br.Name, ".json"), ".txt")
		if want, ok := says[key]; !ok || !strings.Contains(br.Reason, want) {
			t.Errorf("%s: %q, want it to say %q", br.Name, br.Reason, want)
		}
		if !strings.Contains(err.Error(), "remove it") {
			t.Errorf("%v does not say what to do", err)
		}
	}
}

func mustJSON(t *testing.T, r Record) string {
	t.Helper()
	s, err := json_(r)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func json_(r Record) (string, error) {
	b, err := json.Marshal(r)
	return string(b), err
}

// A Berth's start sweeps the default directories of Berths that went away
// without an orderly stop (a kill -9 leaves its directory, as it leaves
// its lock free): one with no record goes, one whose records a Berth may
// still take back stays until they are older than a day, and one a live
// Berth holds stays.
//
// Issue 29 item 1.
func TestDefaultSweepsTheDirectoriesOfBerthsThatAreGone(t *testing.T) {
	base := filepath.Join(t.TempDir(), "berth", "state")
	killed := func(records ...string) *Store {
		t.Helper()
		s, err := Default(base)
		if err != nil {
			t.Fatal(err)
		}
		for _, tag := range records {
			if err := s.Put(record(tag)); err != nil {
				t.Fatal(err)
			}
		}
		s.records.Close()
		s.calls.Close()
		s.runs.Close()
		s.lock.Close() // as a killed Berth's lock goes: the directory stays
		return s
	}
	empty := killed()
	recent := killed(tag1)
	old := killed(tag1)
	// A run with no kept process, which Close keeps a directory for too.
	withRun, err := Default(base)
	if err != nil {
		t.Fatal(err)
	}
	if err := withRun.PutRun(Run{Run: "run-1", Conversation: "conv", Workdir: "/w", Enclosure: Enclosure{Driver: "host", ID: "local"}, Started: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	if err := withRun.Close(); err != nil {
		t.Fatal(err)
	}
	day := time.Now().Add(-25 * time.Hour)
	if err := os.Chtimes(filepath.Join(old.Dir(), recordsName, fileName(tag1)), day, day); err != nil {
		t.Fatal(err)
	}
	live, err := Default(base)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	next, err := Default(base)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	for _, c := range []struct {
		what  string
		dir   string
		stays bool
	}{
		{"a gone Berth's directory with no record", empty.Dir(), false},
		{"a gone Berth's directory with a record of a minute ago", recent.Dir(), true},
		{"a gone Berth's directory whose records are older than a day", old.Dir(), false},
		{"a stopped Berth's directory with a run of a minute ago", withRun.Dir(), true},
		{"a live Berth's directory", live.Dir(), true},
	} {
		_, err := os.Stat(c.dir)
		if stays := err == nil; stays != c.stays {
			t.Errorf("%s: stays %v, want %v (%v)", c.what, stays, c.stays, err)
		}
	}
}

// A rewrite replaces the record whole, in place: longer or shorter, it
// is read back as written, the file keeps mode 0600 whatever the umask,
// and nothing else is left in records/. One of a record Put never wrote
// fails and makes nothing; a Put after rewrites replaces the file, and
// the next rewrite changes the new file, not the one Put replaced; after
// Remove, a rewrite does not bring the record back. A record caught
// between a rewrite's first write and its last (its first byte '!') is
// refused when read.
//
// Issue 28: a rewrite is on the way of a language server's first open of
// a document, so it does not wait for the disk, nor rename.
func TestARewriteReplacesTheRecordAndLeavesNothingElse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := record(tag1)
	if err := s.Put(want); err != nil {
		t.Fatal(err)
	}
	old := syscall.Umask(0o377)
	want.Kind, want.Role, want.Data = "lsp", "gopls", json.RawMessage(`{"open":["main.go"]}`)
	err = s.Rewrite(want)
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	got, bad := s.Records()
	var data bytes.Buffer
	if len(got) == 1 {
		_ = json.Compact(&data, got[0].Data)
	}
	if len(bad) != 0 || len(got) != 1 || got[0].Role != "gopls" || data.String() != `{"open":["main.go"]}` {
		t.Fatalf("Records() after Rewrite = %+v, %v", got, bad)
	}
	files := func() []string {
		entries, err := os.ReadDir(filepath.Join(dir, "records"))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
	if names := files(); len(names) != 1 || names[0] != tag1+".json" {
		t.Errorf("records/ holds %q, want the record alone", names)
	}
	if st, err := os.Stat(filepath.Join(dir, "records", tag1+".json")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the rewritten record: %v, %v; want mode 0600", st.Mode(), err)
	}
	role := func() string {
		t.Helper()
		got, bad := s.Records()
		if len(bad) != 0 || len(got) != 1 {
			t.Fatalf("Records() = %+v, %v; want one record", got, bad)
		}
		return got[0].Role
	}
	for _, r := range []string{"a-much-longer-role-name-than-before", "short", "gopls"} {
		want.Role = r
		if err := s.Rewrite(want); err != nil {
			t.Fatal(err)
		}
		if got := role(); got != r {
			t.Errorf("after rewriting the role to %q, it reads %q", r, got)
		}
	}

	// Put replaces the file; the next rewrite changes the new one.
	want.Role = "put"
	if err := s.Put(want); err != nil {
		t.Fatal(err)
	}
	want.Role = "rewritten-after-put"
	if err := s.Rewrite(want); err != nil {
		t.Fatal(err)
	}
	if got := role(); got != "rewritten-after-put" {
		t.Errorf("a rewrite after Put: the role reads %q", got)
	}

	// A record Put never wrote is not made by a rewrite, and neither is
	// one removed.
	tag2 := "berth-fedcba9876543210fedcba98"
	if err := s.Rewrite(record(tag2)); err == nil {
		t.Error("Rewrite of a record never Put: nil error")
	}
	if names := files(); len(names) != 1 {
		t.Errorf("records/ holds %q after a rewrite of a record never Put, want the first alone", names)
	}
	if err := s.Remove(tag1); err != nil {
		t.Fatal(err)
	}
	if err := s.Rewrite(want); err == nil {
		t.Error("Rewrite after Remove: nil error")
	}
	if names := files(); len(names) != 0 {
		t.Errorf("records/ holds %q after Remove and a rewrite, want nothing", names)
	}

	// A directory where the record would be: refused, nothing changes.
	if err := os.Mkdir(filepath.Join(dir, "records", tag2+".json"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := s.Rewrite(record(tag2)); err == nil {
		t.Error("Rewrite over a directory: nil error")
	}
	if err := os.Remove(filepath.Join(dir, "records", tag2+".json")); err != nil {
		t.Fatal(err)
	}

	// Caught between a rewrite's first write and its last.
	if err := s.Put(want); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "records", tag1+".json")
	b, err := os.ReadFile(path)
	if err != nil || b[0] != '{' {
		t.Fatalf("the record: %q, %v", b, err)
	}
	b[0] = '!'
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, bad := s.Records(); len(got) != 0 || len(bad) != 1 || !strings.Contains(bad[0].Error(), "a rewrite of it was cut short") {
		t.Errorf("a record whose first byte is '!': read as %+v, %v; want it refused as a rewrite cut short", got, bad)
	}

	// Once the directory is released, a rewrite refuses: it is the next
	// Berth's.
	if err := s.Put(want); err != nil {
		t.Fatal(err)
	}
	if err := s.Rewrite(want); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Rewrite(want); err == nil || !strings.Contains(err.Error(), "released") {
		t.Errorf("Rewrite after Close: %v, want a refusal", err)
	}
}
