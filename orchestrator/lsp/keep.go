package lsp

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/state"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// A language server outlives a Berth that goes away without stopping it
// (issue 29 item 3), as a kernel does: it is started with Cmd.Keep, so
// that its relay holds it, and its record in the state directory keeps
// what a Berth that comes back needs to park it again (keptServer). That
// Berth takes it back at its start (Provider.Take) and parks it, for the
// next run on the same enclosure and root to adopt, as if the run that
// owned it had ended: it closes the documents the record says may be
// open, and the server keeps what was left of its lsp.keep_warm (the
// full time when a run owned it).

// keptServer is a language server's data in its record.
type keptServer struct {
	// Key is its park key but the enclosure, which the record names.
	Key keptKey `json:"key"`
	// Init is its answer to initialize: its capabilities and position
	// encoding, which a Berth that takes it back cannot ask again.
	Init json.RawMessage `json:"init"`
	// Loaded: it had loaded its project (a server taken back that had not
	// would never say so again: its progress went to the Berth before).
	Loaded bool `json:"loaded,omitempty"`
	// Complained: it said it is in error, so it is never parked.
	Complained bool `json:"complained,omitempty"`
	// Open lists the documents it may have open, relative to the workdir,
	// the most recently used first: a document is added before the
	// server hears of it and removed once it heard it closed, so the list
	// holds at least every open one.
	// OpenUnknown: they were too many to record.
	Open        []string `json:"open,omitempty"`
	OpenUnknown bool     `json:"openUnknown,omitempty"`
	// Reopen lists the documents the next run reopens (lsp.reopen_max),
	// relative to the workdir: while it is parked, those its last run
	// used; while a run owns it, those that run inherited. The first to
	// go when the record is too long.
	Reopen []string `json:"reopen,omitempty"`
	// Deadline is the end of its keep-warm time while it is parked; zero
	// while a run owns it.
	Deadline time.Time `json:"deadline,omitzero"`
	// Stamps are its files as it knows them while parked (fileStamps), a
	// line "size modnanos path" each, path relative to the root; "" when
	// they were too many to record, or while a run owns it.
	Stamps string `json:"stamps,omitempty"`
	// Known is when Berth last wrote the record while a run owned the
	// server, or, parked without Stamps, since when it knows the disk:
	// what changed on disk after it, the server may not know.
	Known time.Time `json:"known,omitzero"`
	// Generation is how many Berths took the server back before the one
	// that writes the record (renumbered).
	Generation int `json:"generation,omitempty"`
}

// keptKey is parkKey in a record.
type keptKey struct {
	Workdir  string `json:"workdir"`
	Root     string `json:"root"`
	Name     string `json:"name"`
	Command  string `json:"command"`
	Config   string `json:"config"`
	Identity string `json:"identity"`
}

// keeper writes a kept server's record.
type keeper struct {
	note   func(json.RawMessage) error // the run's enclosure's Noter, for the server's process
	forget func(why error) error       // removes the record (orchestrator.Forgetter); nil: none

	mu   sync.Mutex // orders the writes; guards data and off
	data keptServer
	// off: a write failed and the record was removed: the server is no
	// longer kept, and nothing more is written.
	off bool
}

// startKeeping writes s's first record through enc's Noter, when enc
// keeps state and s's process is kept, and its load once it has loaded
// the project; gen is how many Berths took it back before.
func (s *server) startKeeping(enc enclosure.Enclosure, key parkKey, gen int) {
	n, ok := enc.(orchestrator.Noter)
	if !ok {
		return // Berth keeps no state
	}
	handle := s.proc.handle
	if _, ok := handle.(enclosure.Kept); !ok {
		return
	}
	k := &keeper{note: func(b json.RawMessage) error { return n.Note(handle, b) }, data: keptServer{
		Key:  keptKey{Workdir: key.workdir, Root: key.root, Name: key.name, Command: key.command, Config: key.config, Identity: key.identity},
		Init: s.initResult, Loaded: s.load.isLoaded(), Generation: gen,
	}}
	if f, ok := enc.(orchestrator.Forgetter); ok {
		k.forget = func(why error) error { return f.Forget(handle, why) }
	}
	s.keep.Store(k)
	// A complaint heard before the keeper was there (during initialize)
	// is read now; one after, by the client.
	_ = k.update(func(d *keptServer) { d.Complained = s.complained.Load() })
	if !k.data.Loaded {
		go func() {
			select {
			case <-s.load.loaded:
				_ = k.update(func(d *keptServer) { d.Loaded = true })
			case <-s.proc.exited:
			}
		}()
	}
}

// update changes the record's data with f and writes it; while a run
// owns the server, the record says it knew the disk as of now. A list
// too long for a record is left out and said unknown. A record that
// cannot be written is removed, so that no Berth takes the server back
// on what it says (its relay ends it after the grace should Berth go
// away): the error is for a record that could not be removed either,
// which may then say less than the server was told. A nil keeper does
// nothing.
func (k *keeper) update(f func(*keptServer)) error {
	if k == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.off {
		return nil
	}
	f(&k.data)
	if k.data.Deadline.IsZero() {
		k.data.Known = time.Now().UTC()
	}
	b, err := json.Marshal(k.data)
	if err == nil && len(b) > state.MaxData && k.data.Reopen != nil {
		k.data.Reopen = nil // the next run reopens nothing
		b, err = json.Marshal(k.data)
	}
	if err == nil && len(b) > state.MaxData && k.data.Stamps != "" {
		k.data.Stamps = "" // the server is told by time (Known) instead
		b, err = json.Marshal(k.data)
	}
	if err == nil && len(b) > state.MaxData {
		k.data.Open, k.data.OpenUnknown = nil, true
		b, err = json.Marshal(k.data)
	}
	if err == nil {
		err = k.note(b)
	}
	if err == nil {
		return nil
	}
	if k.forget != nil && k.forget(err) == nil {
		k.off = true
		return nil
	}
	return fmt.Errorf("recording a language server in the state directory: %w (free space there, or fix its permissions: state.dir)", err)
}

// opened records the documents s has open (s.docs); an error says the
// record could be neither written nor removed.
func (k *keeper) opened(s *server) error {
	if k == nil {
		return nil
	}
	rel := k.rel(s.docs.recent(-1))
	return k.update(func(d *keptServer) {
		if !d.OpenUnknown {
			d.Open = rel
		}
	})
}

// parked records that the server is parked until deadline, its
// documents closed, knowing its files as known says, with those its run
// had open for the next to reopen.
func (k *keeper) parked(deadline time.Time, known baseline, reopen []string) {
	_ = k.update(func(d *keptServer) {
		d.Open, d.OpenUnknown = nil, false
		d.Reopen = k.rel(reopen)
		d.Deadline = deadline
		d.Stamps = known.stamps.encode(d.Key.Root)
		if known.stamps == nil {
			d.Known = known.since
		}
	})
}

// adopted records that a run owns the server again.
func (k *keeper) adopted() {
	_ = k.update(func(d *keptServer) {
		d.Deadline, d.Stamps = time.Time{}, ""
	})
}

// rel is paths, absolute host paths, relative to the workdir, in order;
// one outside it is left out (a record never names one: Take refuses it).
func (k *keeper) rel(paths []string) []string {
	if len(paths) == 0 {
		return nil
	}
	out := make([]string, 0, len(paths))
	for _, abs := range paths {
		if r, err := filepath.Rel(k.data.Key.Workdir, abs); err == nil && filepath.IsLocal(r) {
			out = append(out, filepath.ToSlash(r))
		}
	}
	return out
}

var _ orchestrator.Taker = (*Provider)(nil)

// Take parks a language server a Berth before this one started and left
// to its relay, for the next run on its enclosure and root: the documents
// its record says may be open are closed, and it keeps what was left of
// its lsp.keep_warm when it was parked, or the whole of it when a run
// owned it. It is not parked, and the error says why, when this Berth
// would not have parked it either: its catalog entry or enclosure
// changed, it said it is in error, it had not loaded its project, its
// time passed while Berth was away, or its open documents were too many
// to record.
func (p *Provider) Take(enc enclosure.Enclosure, rec state.Record, handle enclosure.Process) error {
	var d keptServer
	if err := json.Unmarshal(rec.Data, &d); err != nil || d.Key.Name == "" || len(d.Init) == 0 {
		return errors.New("its record lacks the server's data")
	}
	i := slices.IndexFunc(p.conf.Servers, func(c ServerConfig) bool { return c.Name == rec.Role })
	if i < 0 || rec.Role != d.Key.Name {
		return fmt.Errorf("no server %q is in this Berth's catalog (lsp.servers)", rec.Role)
	}
	cfg := p.conf.Servers[i]
	key := parkKey{driver: enc.Driver(), id: enc.ID(), workdir: d.Key.Workdir, root: d.Key.Root, name: d.Key.Name,
		command: d.Key.Command, config: configDigest(cfg), identity: identityOf(enc)}
	left := p.conf.KeepWarm
	if !d.Deadline.IsZero() {
		left = time.Until(d.Deadline)
	}
	switch {
	case !p.pool.on():
		return errors.New("lsp.keep_warm is 0: no server is parked")
	case key.config != d.Key.Config:
		return fmt.Errorf("its catalog entry (lsp.servers %s) changed", cfg.Name)
	case key.identity != d.Key.Identity:
		return fmt.Errorf("its enclosure's user or relay changed (%s, then %s)", d.Key.Identity, key.identity)
	case d.Complained:
		return errors.New("it had said it is in error")
	case !d.Loaded:
		return errors.New("it had not loaded its project")
	case d.OpenUnknown:
		return errors.New("its open documents were too many to record")
	case left <= 0:
		return errors.New("its keep-warm time (lsp.keep_warm) passed while Berth was away")
	}
	// Parked with its files recorded, it is told what differs from them;
	// else (a run owned it, or its files were too many to record) the
	// files changed since Berth last knew what it knows. No walk of the
	// files here: the adopting run makes the one it makes anyway.
	known := baseline{since: d.Known}
	if d.Stamps != "" {
		var err error
		if known.stamps, err = decodeStamps(key.root, d.Stamps); err != nil {
			return err
		}
	}
	open, err := inWorkdir(key.workdir, d.Open, "an open document")
	if err != nil {
		return err
	}
	reopen, err := inWorkdir(key.workdir, d.Reopen, "a document to reopen")
	if err != nil {
		return err
	}
	ws, err := workspace.NewWith(key.workdir, workspace.Options{View: enc})
	if err != nil {
		return fmt.Errorf("its workdir: %w", err)
	}
	s := newServer(cfg, p.conf, p.metrics, key.root, key.workdir, enc)
	s.paths.bind(ws)
	gen := d.Generation + 1
	s.proc.take(handle, &client{s: s}, gen)
	s.takenBack = true
	if !rec.Started.IsZero() {
		s.proc.started = rec.Started // "up" counts from its start
	}
	ok := false
	defer func() {
		if !ok {
			ws.Close()
			// Killed first: closing the connection waits for its reader,
			// which a server that outlives its stdin would hold.
			_ = handle.Kill()
			<-s.proc.exited
			_ = s.proc.conn.Close()
		}
	}()
	if err := s.readInitResult(d.Init); err != nil {
		return err
	}
	s.load.markLoaded()
	ctx, cancel := context.WithTimeout(context.Background(), parkTimeout)
	defer cancel()
	for _, abs := range open {
		if err := s.proc.api.DidClose(ctx, &protocol.DidCloseTextDocumentParams{TextDocument: protocol.TextDocumentIdentifier{URI: s.paths.toURI(abs)}}); err != nil {
			return fmt.Errorf("closing %s: %w", s.paths.rel(abs), err)
		}
	}
	// The next run reopens what the last one used (what it may have had
	// open when Berth went away, the most recent first), then what it had
	// inherited; the server is no run's yet.
	s.docs.reopen = firstOf(p.conf.ReopenMax, open, reopen)
	s.startKeeping(enc, key, gen)
	if !s.proc.alive() {
		return errors.New("it ended as it was taken back")
	}
	if !p.pool.put(key, s, ws, known, left) {
		return errors.New("Berth is stopping")
	}
	ok = true
	return nil
}

// inWorkdir is the absolute paths of rels, paths a record names (each
// what), relative to workdir; an error for one that leaves it.
func inWorkdir(workdir string, rels []string, what string) ([]string, error) {
	var out []string
	for _, rel := range rels {
		if !filepath.IsLocal(filepath.FromSlash(rel)) {
			return nil, fmt.Errorf("its record names %s %.80q outside the workdir", what, rel)
		}
		out = append(out, filepath.Join(workdir, filepath.FromSlash(rel)))
	}
	return out, nil
}

// configDigest is the digest of a catalog entry in a park key.
func configDigest(cfg ServerConfig) string {
	b, _ := json.Marshal(cfg) // an entry is plain data: it marshals
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// identityOf is who enc runs a server as, through which relay, in a park
// key.
func identityOf(enc enclosure.Enclosure) string {
	caps := enc.Capabilities()
	return "user=" + caps.User + " relay=" + caps.Relay
}

// take opens the connection to a server a Berth before this one started,
// over handle, its process taken back from its relay by the Berth of
// generation gen: its stderr is read into the ring, its stdout from its
// first message header on (the Berth before may have read part of a
// message), and its requests numbered apart from the Berths' before
// (renumbered).
func (p *process) take(handle enclosure.Process, client protocol.Client, gen int) {
	p.handle = handle
	if r := handle.Stderr(); r != nil {
		go func() { _, _ = io.Copy(p.stderr, r) }()
	}
	p.open(&resynced{r: bufio.NewReaderSize(handle.Stdout(), 64<<10)}, client, func(s jsonrpc2.Stream) jsonrpc2.Stream { return newRenumbered(s, gen) })
}

// headerPattern is the start of an LSP message: its Content-Length line.
// It cannot occur inside a message's JSON body, where a carriage return
// is always escaped in a string and letters occur only in strings.
var headerPattern = regexp.MustCompile(`Content-Length:[ \t]*[0-9]+\r\n`)

// resyncTail is how much of what was skipped is kept to be searched
// again with what follows: a header line cut in two.
const resyncTail = 64

// resynced reads r from its first message header on, skipping what comes
// before: the rest of a message the Berth before read the start of.
type resynced struct {
	r     *bufio.Reader
	found bool
}

func (s *resynced) Read(b []byte) (int, error) {
	if !s.found {
		if err := s.skip(); err != nil {
			return 0, err
		}
		s.found = true
	}
	return s.r.Read(b)
}

// skip discards what comes before the first header.
func (s *resynced) skip() error {
	for {
		if _, err := s.r.Peek(1); err != nil {
			return err
		}
		buf, _ := s.r.Peek(s.r.Buffered())
		if loc := headerPattern.FindIndex(buf); loc != nil {
			_, err := s.r.Discard(loc[0])
			return err
		}
		if len(buf) > resyncTail {
			if _, err := s.r.Discard(len(buf) - resyncTail); err != nil {
				return err
			}
			continue
		}
		// Too little to tell: wait for more.
		if _, err := s.r.Peek(len(buf) + 1); err != nil {
			return err
		}
	}
}

// renumbered is the stream of a server taken back after a restart: the
// requests Berth sends it go out with string ids of its generation's own
// ("b2-17" for request 17 of the second Berth to take it back), and an
// answer whose id is not of that form (one to the Berth that started it,
// which counted 1, 2, ...; or to a Berth of an earlier generation) is
// dropped instead of read as the answer to a new request of the same
// number. String ids are JSON-RPC's and LSP's own, which every server
// takes; numbers past 32 bits are not (lsp-server's i32).
type renumbered struct {
	jsonrpc2.Stream
	prefix string // "b<generation>-"
}

// newRenumbered is s with the ids of generation gen (1 for the first
// Berth to take the server back).
func newRenumbered(s jsonrpc2.Stream, gen int) renumbered {
	return renumbered{Stream: s, prefix: "b" + strconv.Itoa(gen) + "-"}
}

// Write sends msg: a call with its id in the generation's form, and a
// $/cancelRequest naming one so. The connection hands its messages over
// in forms of its own, so each is encoded to be read (a server taken
// back pays it, no other); only a call or a cancel, small, is decoded
// and rebuilt, never a document's text.
func (s renumbered) Write(ctx context.Context, msg jsonrpc2.Message) (int64, error) {
	b, err := jsonrpc2.EncodeMessage(msg)
	if err != nil {
		return 0, err
	}
	view, err := jsonrpc2.ScanMessageView(b)
	if err != nil {
		return 0, err
	}
	if view.Kind != jsonrpc2.MessageViewCall && string(view.MethodBytes) != "$/cancelRequest" {
		return s.Stream.Write(ctx, msg)
	}
	if msg, err = jsonrpc2.DecodeMessage(b); err != nil {
		return 0, err
	}
	switch m := msg.(type) {
	case *jsonrpc2.Call:
		if n, isNum := m.ID().Number(); isNum {
			msg = jsonrpc2.NewCall(s.id(n), m.Method(), m.Params())
		}
	case *jsonrpc2.Notification:
		if m.Method() == "$/cancelRequest" {
			var p struct {
				ID json.RawMessage `json:"id"`
			}
			if json.Unmarshal(m.Params(), &p) == nil {
				if n, err := strconv.ParseInt(string(p.ID), 10, 64); err == nil {
					params, _ := json.Marshal(map[string]string{"id": s.prefix + strconv.FormatInt(n, 10)})
					msg = jsonrpc2.NewNotification(m.Method(), params)
				}
			}
		}
	}
	return s.Stream.Write(ctx, msg)
}

// id is request n's id on the wire.
func (s renumbered) id(n int64) jsonrpc2.ID {
	return jsonrpc2.NewStringID(s.prefix + strconv.FormatInt(n, 10))
}

func (s renumbered) Read(ctx context.Context) (jsonrpc2.Message, int64, error) {
	for {
		msg, n, err := s.Stream.Read(ctx)
		if err != nil {
			return msg, n, err
		}
		r, ok := msg.(*jsonrpc2.Response)
		if !ok {
			return msg, n, nil
		}
		str, isStr := r.ID().StringValue()
		rest, ours := strings.CutPrefix(str, s.prefix)
		id, perr := strconv.ParseInt(rest, 10, 64)
		if !isStr || !ours || perr != nil {
			continue // the answer to a request of a Berth before
		}
		return jsonrpc2.NewResponse(jsonrpc2.NewNumberID(id), r.Result(), r.Err()), n, nil
	}
}
