package lsp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"

	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/orchestrator/metrics"
	"github.com/berth-dev/berth/orchestrator/state"
)

// frame is body as a message on a language server's stdout.
func frame(body string) string {
	return "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// A server taken back after a restart may have its stdout cut inside a
// message the Berth before read the start of: the connection reads from
// the first whole message on, even when what comes before holds
// "Content-Length:" inside a JSON string (hover text about HTTP) and the
// header is split across reads.
//
// Issue 29 item 3 (language servers).
func TestTakenBackStdoutIsReadFromTheFirstMessageHeader(t *testing.T) {
	tail := `ng: "Content-Length: 12 is a header"}}` // the end of a message the Berth before began
	one := `{"jsonrpc":"2.0","method":"window/logMessage","params":{"type":3,"message":"Content-Length: 5"}}`
	two := `{"jsonrpc":"2.0","id":7,"result":null}`
	r, w := io.Pipe()
	go func() {
		all := tail + frame(one) + frame(two)
		for i := 0; i < len(all); i += 5 { // in small pieces: a header cut in two
			_, _ = w.Write([]byte(all[i:min(i+5, len(all))]))
		}
		w.Close()
	}()
	s := jsonrpc2.NewHeaderStream(stdio{&resynced{r: bufio.NewReaderSize(r, 64<<10)}, nopCloser{io.Discard}})
	msg, _, err := s.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := msg.(*jsonrpc2.Notification); !ok || n.Method() != "window/logMessage" {
		t.Fatalf("first message %#v, want the logMessage notification", msg)
	}
	msg, _, err = s.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if resp, ok := msg.(*jsonrpc2.Response); !ok || resp.ID() != jsonrpc2.NewNumberID(7) {
		t.Fatalf("second message %#v, want the response to 7", msg)
	}
	if _, _, err := s.Read(context.Background()); err == nil {
		t.Fatal("a third message from a stream that ended")
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// A server taken back after a restart may still answer a request of a
// Berth before, whose ids counted from 1 as the new connection's do, or,
// taken back twice, a request of the Berth that took it back first:
// those answers are dropped, and the new request of the same number gets
// the server's answer to it. The ids on the wire are strings of the
// generation's own (LSP's integers are 32 bits), and a $/cancelRequest
// names the request as the wire does.
//
// Issue 29 item 3 (language servers).
func TestTakenBackServerAnswersToTheBerthsBeforeAreDropped(t *testing.T) {
	ours, theirs := net.Pipe()
	defer ours.Close()
	conn := jsonrpc2.NewConn(newRenumbered(jsonrpc2.NewHeaderStream(ours), 2))
	conn.Go(context.Background(), jsonrpc2.MethodNotFoundHandler)
	defer conn.Close()
	server := jsonrpc2.NewHeaderStream(theirs)
	seen := make(chan jsonrpc2.ID, 1)
	cancelled := make(chan string, 1)
	go func() {
		bg := context.Background()
		msg, _, err := server.Read(bg)
		if err != nil {
			return
		}
		call, ok := msg.(*jsonrpc2.Call)
		if !ok {
			return
		}
		seen <- call.ID()
		// The first Berth's request 1 and the first taker's are answered
		// first, then the new one.
		_, _ = server.Write(bg, jsonrpc2.NewResponse(jsonrpc2.NewNumberID(1), jsonrpc2.RawMessage(`"stale"`), nil))
		_, _ = server.Write(bg, jsonrpc2.NewResponse(jsonrpc2.NewStringID("b1-1"), jsonrpc2.RawMessage(`"stale too"`), nil))
		_, _ = server.Write(bg, jsonrpc2.NewResponse(call.ID(), jsonrpc2.RawMessage(`"fresh"`), nil))
		if msg, _, err = server.Read(bg); err == nil {
			if n, ok := msg.(*jsonrpc2.Notification); ok {
				cancelled <- n.Method() + " " + string(n.Params())
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got string
	id, err := conn.Call(ctx, "textDocument/hover", map[string]any{}, &got)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := id.Number(); n != 1 || got != "fresh" {
		t.Fatalf("request %v answered %q, want request 1 answered \"fresh\"", id, got)
	}
	if wire := <-seen; wire != jsonrpc2.NewStringID("b2-1") {
		t.Fatalf("the request went out as %v, want \"b2-1\"", wire)
	}
	if err := conn.Notify(ctx, "$/cancelRequest", map[string]any{"id": 7}); err != nil {
		t.Fatal(err)
	}
	if c := <-cancelled; c != `$/cancelRequest {"id":"b2-7"}` {
		t.Fatalf("the cancel went out as %s", c)
	}
}

// A parked server's files as it knows them survive its record: encoded
// and read back they are the same, and a record naming a path outside
// the root is refused.
//
// Issue 29 item 3 (parked servers).
func TestParkedServerStampsSurviveTheirRecord(t *testing.T) {
	root := t.TempDir()
	fs := fileStamps{
		filepath.Join(root, "main.go"):           {12, time.Unix(0, 1733400000123456789)},
		filepath.Join(root, "dir", "a b.go"):     {0, time.Unix(5, 0)},
		filepath.Join(root, "go.mod"):            {40, time.Unix(0, 7)},
		filepath.Join(root, "deep", "x", "y.go"): {1 << 20, time.Unix(1e9, 1)},
	}
	back, err := decodeStamps(root, fs.encode(root))
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(fs) || len(fs.changes(back)) != 0 {
		t.Fatalf("read back %v, want %v", back, fs)
	}
	for _, bad := range []string{"1 2 ../etc/passwd", "1 2 /etc/passwd", "x 2 a.go", "1 2"} {
		if _, err := decodeStamps(root, bad); err == nil {
			t.Errorf("stamps %q read without an error", bad)
		}
	}
}

// A language server a Berth before left is not parked by a Berth that
// would not have parked it: each reason is said. (Its parking again,
// with real servers, is e2e's TestLanguageServersAreParkedAgainBy...)
//
// Issue 29 item 3 (language servers).
func TestTakeRefusesAServerThisBerthWouldNotPark(t *testing.T) {
	conf := DefaultConfig()
	p, err := New(conf, metrics.NewForTest())
	if err != nil {
		t.Fatal(err)
	}
	enc := host.New()
	cfg := conf.Servers[0]
	good := keptServer{
		Key:  keptKey{Workdir: t.TempDir(), Name: cfg.Name, Config: configDigest(cfg), Identity: identityOf(enc)},
		Init: json.RawMessage(`{"capabilities":{}}`), Loaded: true,
	}
	good.Key.Root = good.Key.Workdir
	cases := []struct {
		name   string
		change func(*keptServer, *state.Record)
		want   string
	}{
		{"no data", func(d *keptServer, r *state.Record) { *d = keptServer{} }, "lacks the server's data"},
		{"another catalog", func(d *keptServer, r *state.Record) { r.Role = "no-such-server" }, "catalog"},
		{"its entry changed", func(d *keptServer, r *state.Record) { d.Key.Config = "0000000000000000" }, "changed"},
		{"another relay", func(d *keptServer, r *state.Record) { d.Key.Identity = "user=x relay=y" }, "user or relay changed"},
		{"in error", func(d *keptServer, r *state.Record) { d.Complained = true }, "in error"},
		{"not loaded", func(d *keptServer, r *state.Record) { d.Loaded = false }, "not loaded"},
		{"too many open", func(d *keptServer, r *state.Record) { d.OpenUnknown = true }, "too many to record"},
		{"expired", func(d *keptServer, r *state.Record) { d.Deadline = time.Now().Add(-time.Second) }, "passed while Berth was away"},
		{"a document to reopen outside the workdir", func(d *keptServer, r *state.Record) {
			d.Deadline, d.Reopen = time.Now().Add(time.Minute), []string{"main.go", "../../etc/passwd"}
		}, `names a document to reopen "../../etc/passwd" outside the workdir`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := good
			rec := state.Record{Kind: metrics.KindLSP, Role: cfg.Name}
			c.change(&d, &rec)
			rec.Data, _ = json.Marshal(d)
			err := p.Take(enc, rec, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Take: %v, want an error saying %q", err, c.want)
			}
		})
	}
	off := conf
	off.KeepWarm = 0
	q, err := New(off, metrics.NewForTest())
	if err != nil {
		t.Fatal(err)
	}
	rec := state.Record{Kind: metrics.KindLSP, Role: cfg.Name}
	rec.Data, _ = json.Marshal(good)
	if err := q.Take(enc, rec, nil); err == nil || !strings.Contains(err.Error(), "lsp.keep_warm is 0") {
		t.Fatalf("Take with lsp.keep_warm 0: %v, want it refused", err)
	}
}

// A record that cannot be written is removed, so that no Berth takes the
// server back on a record that says less than the server was told (its
// documents open), and nothing more is written; when it cannot be
// removed either, the write's error says what to do, and the document
// is not opened (sync).
//
// Issue 29 item 3 (language servers).
func TestAKeptServerRecordThatCannotBeWrittenIsDropped(t *testing.T) {
	full := errors.New("no space left on device")
	var notes, forgets int
	var why error
	k := &keeper{note: func(json.RawMessage) error { notes++; return full }, forget: func(err error) error { forgets++; why = err; return nil }}
	if err := k.update(func(d *keptServer) { d.Open = []string{"a.go"} }); err != nil {
		t.Fatalf("a failed write whose record was removed: %v", err)
	}
	if err := k.update(func(d *keptServer) { d.Open = []string{"a.go", "b.go"} }); err != nil || notes != 1 || forgets != 1 {
		t.Fatalf("after the record was dropped: %v, %d writes, %d removals; want nothing more written", err, notes, forgets)
	}
	if !errors.Is(why, full) {
		t.Errorf("the record was removed for %v, want the write's error (for the log)", why)
	}
	stuck := &keeper{note: func(json.RawMessage) error { return full }, forget: func(error) error { return full }}
	err := stuck.update(func(d *keptServer) { d.Open = []string{"a.go"} })
	if err == nil || !strings.Contains(err.Error(), "state.dir") || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("a record neither written nor removed: %v, want an error naming state.dir", err)
	}
}

// A newly parked server counts, until its own memory is read, as much as
// the largest parked server of its kind already read (none: nothing), so
// that lsp.max_parked_rss_bytes holds from the moment it is parked;
// bench/parking saw 1.02x the cap for that moment before.
//
// Issue 28 item 2 (the memory cap).
func TestANewlyParkedServerCountsItsKindsLargestUntilRead(t *testing.T) {
	p := &pool{parked: []*parkedServer{
		{key: parkKey{name: "pylsp"}, rss: 100, measured: true},
		{key: parkKey{name: "pylsp"}, rss: 300}, // an estimate, not a read
		{key: parkKey{name: "pylsp"}, rss: 80, measured: true},
		{key: parkKey{name: "gopls"}, rss: 900, measured: true},
	}}
	if n := p.estimateLocked("pylsp"); n != 100 {
		t.Errorf("pylsp's estimate: %d, want 100 (the largest read)", n)
	}
	if n := p.estimateLocked("clangd"); n != 0 {
		t.Errorf("clangd's estimate with none parked: %d, want 0", n)
	}
}

// A record over state.MaxData drops the parked server's file stamps
// first, and then, while a run owns it, its open documents, saying them
// unknown: what is written always fits, and a server whose open
// documents are unknown is not taken back (TestTakeRefuses...). With no
// stamps, a server taken back is told the files changed since the time
// its record last knew (baseline by time): changed and created files,
// not older ones.
//
// Issue 29 item 3 (language servers).
func TestAKeptServerRecordStaysWithinItsBound(t *testing.T) {
	var last json.RawMessage
	k := &keeper{note: func(b json.RawMessage) error { last = b; return nil }}
	root := "/w"
	many := fileStamps{}
	for i := range 2000 {
		many[filepath.Join(root, "pkg", strconv.Itoa(i)+"_file.go")] = stamp{int64(i), time.Unix(1e9, int64(i))}
	}
	k.data.Key.Root = root
	if err := k.update(func(d *keptServer) { d.Deadline, d.Stamps = time.Now().Add(time.Minute), many.encode(root) }); err != nil {
		t.Fatal(err)
	}
	var d keptServer
	if err := json.Unmarshal(last, &d); err != nil || len(last) > state.MaxData || d.Stamps != "" {
		t.Fatalf("a record with 2000 stamps: %d bytes, stamps %d bytes; want them dropped to fit %d", len(last), len(d.Stamps), state.MaxData)
	}
	// The documents to reopen go first: stamps that fit are kept.
	long := make([]string, maxReopen)
	for i := range long {
		long[i] = strings.Repeat("deep/", 120) + strconv.Itoa(i) + ".go"
	}
	few := fileStamps{filepath.Join(root, "a.go"): {1, time.Unix(1e9, 0)}}
	if err := k.update(func(d *keptServer) { d.Stamps, d.Reopen = few.encode(root), long }); err != nil {
		t.Fatal(err)
	}
	d = keptServer{}
	if err := json.Unmarshal(last, &d); err != nil || len(last) > state.MaxData || d.Reopen != nil || d.Stamps == "" {
		t.Fatalf("a record with %d long documents to reopen: %d bytes, %d to reopen, stamps %q; want those dropped, the stamps kept", maxReopen, len(last), len(d.Reopen), d.Stamps)
	}
	open := make([]string, 2000)
	for i := range open {
		open[i] = "pkg/" + strconv.Itoa(i) + "_file_with_a_long_name.go"
	}
	if err := k.update(func(d *keptServer) { d.Deadline, d.Open = time.Time{}, open }); err != nil {
		t.Fatal(err)
	}
	d = keptServer{}
	if err := json.Unmarshal(last, &d); err != nil || len(last) > state.MaxData || !d.OpenUnknown || d.Open != nil {
		t.Fatalf("a record with 2000 open documents: %d bytes, open unknown %v; want them dropped to fit", len(last), d.OpenUnknown)
	}

	since := time.Unix(2e9, 0)
	now := fileStamps{
		"/w/old.go": {1, since.Add(-time.Hour)},
		"/w/new.go": {2, since.Add(time.Second)},
		"/w/at.go":  {3, since},
	}
	got := baseline{since: since}.changes(now)
	if len(got) != 2 || got[0].path != "/w/at.go" || got[1].path != "/w/new.go" || got[0].kind != protocol.FileChangeTypeChanged {
		t.Fatalf("changes by time: %+v, want at.go and new.go, changed", got)
	}
}
