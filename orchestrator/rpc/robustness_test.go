package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/berth-dev/berth/orchestrator"
)

// frame frames one body as a good client does.
func frame(body string) string { return fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body) }

// goodEcho is the request each case ends with; it must be answered.
const goodEcho = `{"jsonrpc":"2.0","id":"good","method":"echo","params":{"a":1}}`

// pipeConn serves echoHandler on a stream whose input the test writes as
// raw bytes; out reads the replies.
func pipeConn(t *testing.T, limit int64) (in io.WriteCloser, out Framer, c *peer) {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c = newPeer(NewStreamFramer(inR, outW, closers{inR, outW}, limit), echoHandler, peerOptions{limit: limit})
	c.start()
	out = NewStreamFramer(outR, io.Discard, outR, 0)
	t.Cleanup(func() {
		_ = inW.Close()
		<-c.Done()
		_ = out.Close()
	})
	return inW, out, c
}

type closers []io.Closer

func (cs closers) Close() error {
	for _, c := range cs {
		_ = c.Close()
	}
	return nil
}

// send writes raw bytes on a goroutine of its own: a large write must not
// wait for the test to read the replies it causes.
func send(t *testing.T, w io.Writer, raw string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { _, err := io.WriteString(w, raw); done <- err }()
	t.Cleanup(func() {
		if err := <-done; err != nil {
			t.Errorf("writing: %v", err)
		}
	})
}

// replies reads n replies and returns the errors among them, in order,
// and the ids of the others. Requests are handled concurrently, so their
// answers may come in any order.
func replies(t *testing.T, out Framer, n int) (errs []map[string]any, answered map[any]bool) {
	t.Helper()
	p := &rawPeer{t: t, f: out}
	answered = map[any]bool{}
	for range n {
		m := p.recv()
		if m["error"] != nil {
			errs = append(errs, m)
		} else {
			answered[m["id"]] = true
		}
	}
	return errs, answered
}

// Issue 11 item 5.
func TestStreamResynchronisesAfterABadHeader(t *testing.T) {
	req := `{"jsonrpc":"2.0","id":1,"method":"echo","params":{"b":2}}`
	pad := strings.Repeat("X-Pad: "+strings.Repeat("p", 90)+"\r\n", 100) // 9,900 bytes
	for _, tc := range []struct {
		name, raw string
		code      int64
		want      string
		// answered: the stray bytes were before the message, which
		// is then read and answered.
		answered bool
	}{
		{"length too short", "Content-Length: 20\r\n\r\n" + req, CodeParseError, "not valid JSON", false},
		{"length too long", fmt.Sprintf("Content-Length: %d\r\n\r\n", len(req)+30) + req, CodeParseError, "not valid JSON", false},
		{"length too long by a whole message", fmt.Sprintf("Content-Length: %d\r\n\r\n", len(req)+len(frame(goodEcho))) + req, CodeParseError, "not valid JSON", false},
		{"length missing", "Content-Type: application/json\r\n\r\n" + req, CodeInvalidRequest, "the header has no Content-Length", false},
		{"length negative", "Content-Length: -5\r\n\r\n" + req, CodeInvalidRequest, `Content-Length "-5" is not a non-negative integer`, false},
		{"length not a number", "Content-Length: twelve\r\n\r\n" + req, CodeInvalidRequest, `Content-Length "twelve" is not a non-negative integer`, false},
		{"header block over 8 KiB", pad + frame(req), CodeInvalidRequest, "a header block of more than 8 KiB; the message was skipped", false},
		{"header line over 64 KiB", "X-Pad: " + strings.Repeat("p", 100<<10) + "\r\n" + frame(req), CodeInvalidRequest, "more than 64 KiB; the message was skipped", false},
		{"garbage line", "hello\r\n" + frame(req), CodeInvalidRequest, `"hello" is not a header line`, true},
		{"garbage line over 64 KiB", strings.Repeat("{", 70<<10) + "\r\n" + frame(req), CodeInvalidRequest, "a line of more than 64 KiB where a header belongs", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, out, _ := pipeConn(t, 0)
			send(t, in, tc.raw+frame(goodEcho))
			n := 2
			if tc.answered {
				n = 3
			}
			errs, answered := replies(t, out, n)
			if len(errs) != 1 || errCode(errs[0]) != tc.code || !strings.Contains(errMessage(errs[0]), tc.want) || errs[0]["id"] != nil {
				t.Fatalf("errors: %v; want one error %d with %q and id null", errs, tc.code, tc.want)
			}
			if !answered["good"] || tc.answered && !answered[1.0] {
				t.Fatalf("answered %v, want the good request answered (and the one after the stray bytes: %v)", answered, tc.answered)
			}
			// Nothing else is waiting: the next reply is the next request's.
			send(t, in, frame(`{"jsonrpc":"2.0","id":"fin","method":"echo"}`))
			if _, answered := replies(t, out, 1); !answered["fin"] {
				t.Fatalf("after the good request: %v, want only the next request's answer", answered)
			}
		})
	}
}

// Issue 11 item 5.
func TestStreamThatCannotBeRecoveredEndsOnlyItsConnection(t *testing.T) {
	var log bytes.Buffer
	var mu sync.Mutex
	s := newServer(t, 0)
	s.Log = slog.New(slog.NewTextHandler(lockedWriter{&mu, &log}, nil))
	other := connect(t, s)
	run := startRun(t, other)

	in, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	defer w.Close()
	ended := make(chan error, 1)
	s.MaxMessageSize = 1 << 10
	go func() { ended <- s.ServeStdio(in, outW) }()
	// A bad header, then more than the message limit with no header in it.
	send(t, w, "Content-Length: x\r\n\r\n"+strings.Repeat("z", 20<<10))
	go io.Copy(io.Discard, outR) // the one error reply
	if err := <-ended; !errors.Is(err, ErrStreamLost) {
		t.Fatalf("the lost stream ended with %v, want ErrStreamLost", err)
	}
	mu.Lock()
	logged := log.String()
	mu.Unlock()
	if !strings.Contains(logged, "cannot be recovered") || !strings.Contains(logged, "no Content-Length header in the") {
		t.Fatalf("log: %q, want a line saying the stream cannot be recovered", logged)
	}
	if _, err := other.ListTools(context.Background(), run.RunID, ""); err != nil {
		t.Fatalf("the other connection: %v", err)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// The library echoes a string id's bytes as they came; what Berth writes
// is UTF-8 all the same, and the connection reads on.
//
// Issue 11 item 6; issue 27 item 4 (DecodeMessage is the only check).
func TestRepliesAreUTF8WhateverTheID(t *testing.T) {
	_, p := newRawPair(t, echoHandler, 0)
	for _, body := range []string{
		"{\"jsonrpc\":\"2.0\",\"id\":\"a\xffb\",\"method\":\"echo\"}",
		"{\"id\":\"a\xc3b\",\"method\":\"echo\",\"jsonrpc\":\"2.0\",\"params\":{}}",
	} {
		p.send(body)
		b, err := p.f.Read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if !utf8.Valid(b) || json.Unmarshal(b, &m) != nil || m["id"] != "a\uFFFDb" {
			t.Fatalf("got %q, want UTF-8 JSON with the id's bad byte as U+FFFD", b)
		}
		p.send(goodEcho)
		if m := p.recv(); m["id"] != "good" {
			t.Fatalf("the next request got %v", m)
		}
	}
}

// Params nested deeper than JSON readers go are answered under the
// request's id; a message that is not JSON, however deep, under id null.
//
// Issue 11 item 6.
func TestDeepJSONIsAnsweredUnderItsID(t *testing.T) {
	p, _ := startRunOverPipe(t, newServer(t, 0))
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	for _, tc := range []struct {
		body string
		id   any
		code int64
		want string
	}{
		{`{"jsonrpc":"2.0","id":7,"method":"run/stop","params":{"runId":` + deep + `}}`, 7.0, CodeInvalidParams, "exceeded max depth"},
		{`{"jsonrpc":"2.0","method":"run/stop","params":{"runId":` + deep + `},"id":"late"}`, "late", CodeInvalidParams, "exceeded max depth"},
		{`{"jsonrpc":"2.0","id":8,"method":"run/stop","params":{"runId":` + deep + `}`, nil, CodeParseError, "not valid JSON"},
	} {
		p.send(tc.body)
		m := p.recv()
		if m["id"] != tc.id || errCode(m) != tc.code || !strings.Contains(errMessage(m), tc.want) {
			t.Fatalf("got %v, want %d with %q under id %v", m, tc.code, tc.want, tc.id)
		}
		p.send(`{"jsonrpc":"2.0","id":"good","method":"initialize"}`)
		if m := p.recv(); m["id"] != "good" {
			t.Fatalf("the next request got %v", m)
		}
	}
}

// stuckTool blocks until release is closed, ignoring its context.
type stuckTool struct {
	spec             orchestrator.Spec
	started, release chan struct{}
}

func (s *stuckTool) Spec() orchestrator.Spec { return s.spec }
func (s *stuckTool) Call(context.Context, *orchestrator.Run, json.RawMessage) (*orchestrator.Result, error) {
	s.started <- struct{}{}
	<-s.release
	return orchestrator.Text("too late"), nil
}

type toolsProvider []orchestrator.Tool

func (toolsProvider) Feature() string                               { return orchestrator.FeatureStructural }
func (p toolsProvider) Tools(*orchestrator.Run) []orchestrator.Tool { return p }

// A tool call whose work never returns is answered when the harness
// cancels it and at its deadline, and the work is counted in
// berth_stuck_calls until it returns.
//
// Issue 11 item 3.
func TestStuckCallIsAnsweredOverTheProtocol(t *testing.T) {
	s := newServer(t, 0)
	stuck := &stuckTool{started: make(chan struct{}, 2), release: make(chan struct{}),
		spec: orchestrator.Spec{Name: "stuck", ParallelSafe: true, InputSchema: json.RawMessage(`{"type":"object"}`), CancelGrace: time.Millisecond}}
	late := &stuckTool{started: stuck.started, release: stuck.release,
		spec: orchestrator.Spec{Name: "late", ParallelSafe: true, InputSchema: json.RawMessage(`{"type":"object"}`), Timeout: 10 * time.Millisecond, CancelGrace: time.Millisecond}}
	s.Registry.Add(toolsProvider{stuck, late})
	p, runID := startRunOverPipe(t, s)

	p.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"runId":"` + runID + `","name":"stuck","arguments":{}}}`)
	<-stuck.started
	p.send(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":2}}`)
	if m := p.recv(); m["id"] != 2.0 || errCode(m) != CodeRequestCancelled {
		t.Fatalf("the cancelled call got %v, want -32800", m)
	}
	p.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"runId":"` + runID + `","name":"late","arguments":{}}}`)
	<-stuck.started
	m := p.recv()
	res, _ := m["result"].(map[string]any)
	if m["id"] != 3.0 || res["isError"] != true || !strings.Contains(fmt.Sprint(res["content"]), "timed out after 10ms and did not stop") {
		t.Fatalf("the call past its deadline got %v, want a timeout result", m)
	}
	if n := testutil.ToFloat64(s.Metrics.StuckCalls); n != 2 {
		t.Fatalf("berth_stuck_calls is %v, want 2", n)
	}
	close(stuck.release)
	for testutil.ToFloat64(s.Metrics.StuckCalls) != 0 {
		time.Sleep(time.Millisecond)
	}
}
