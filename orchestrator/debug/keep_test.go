package debug

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-dap"

	"github.com/berth-dev/berth/orchestrator/state"
)

// A resumed session's stream is read from the first message header on:
// the rest of a message the Berth before had begun to read is skipped,
// and the messages after it are read whole. Its requests are numbered
// from resumedSeq on.
//
// Issue 29 item 3 (debug sessions).
func TestResumedStreamIsReadFromTheNextHeader(t *testing.T) {
	var stream bytes.Buffer
	stream.WriteString(`utput":"half of a message"}}`)
	_ = dap.WriteProtocolMessage(&stream, &dap.StoppedEvent{Event: dap.Event{ProtocolMessage: dap.ProtocolMessage{Seq: 9, Type: "event"}, Event: "stopped"},
		Body: dap.StoppedEventBody{Reason: "breakpoint", ThreadId: 1}})
	events := make(chan dap.EventMessage, 1)
	var sent bytes.Buffer
	c := newClientFrom(&resyncReader{r: bufio.NewReader(&stream)}, &sent, func(e dap.EventMessage) { events <- e }, resumedSeq)
	select {
	case e := <-events:
		if st, ok := e.(*dap.StoppedEvent); !ok || st.Body.ThreadId != 1 {
			t.Fatalf("the first event %#v, want the stopped one", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no event read after the partial message: %v", c.Err())
	}
	<-c.Done()
	if _, err := c.send(&dap.ThreadsRequest{Request: dap.Request{Command: "threads"}}); err == nil {
		t.Fatal("a send after the stream ended succeeded")
	}
	quiet, w := io.Pipe() // an adapter that says nothing
	defer w.Close()
	c2 := newClientFrom(quiet, &sent, nil, resumedSeq)
	if _, err := c2.send(&dap.ThreadsRequest{Request: dap.Request{Command: "threads"}}); err != nil {
		t.Fatal(err)
	}
	var req struct{ Seq int }
	body := sent.String()[strings.Index(sent.String(), "{"):]
	if err := json.Unmarshal([]byte(body), &req); err != nil || req.Seq != resumedSeq+1 {
		t.Errorf("the resumed client's first request %s, want seq %d", body, resumedSeq+1)
	}

	// A stream with no header within a message's bound is refused.
	x := &resyncReader{r: bufio.NewReader(io.LimitReader(zeros{}, maxMessage+64))}
	if _, err := x.Read(make([]byte, 8)); err == nil || !strings.Contains(err.Error(), "no message header") {
		t.Errorf("a stream of zeros: %v", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// Resume refuses a record it cannot give back, saying why: one with no
// session's data, one of an adapter the configuration does not list, or
// one reached over TCP. A session whose time to live passed while Berth
// was away is ended, not resumed: the conversation's status says so, and
// its stored breakpoints are kept.
//
// Issue 29 item 3 (debug sessions).
func TestResumeRefusesWhatItCannotGiveBack(t *testing.T) {
	e := newEnv(t, "python", func(c *Config) { c.SessionTTL = time.Minute })
	rec := func(role string, data any) state.Record {
		b, _ := json.Marshal(data)
		if data == nil {
			b = nil
		}
		return state.Record{Kind: "debug", Role: role, Run: "run-1", Conversation: "conv-1", Workdir: e.dir, Data: b}
	}
	for _, c := range []struct {
		rec  state.Record
		says string
	}{
		{rec("debugpy", nil), "holds no debug session"},
		{rec("debugpy", map[string]any{"program": "app.py"}), "not a debug session's"},
		{rec("debugpy", map[string]any{"program": "app.py", "launched": time.Now(), "extra": 1}), "not a debug session's"},
		{rec("gdb", kept{Program: "app.py", Launched: time.Now()}), `adapter "gdb" is not in debug.adapters`},
		{rec("delve", kept{Program: ".", Launched: time.Now()}), "reached over tcp"},
	} {
		if err := e.p.Resume(e.run, c.rec, nil); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("Resume of %s %s: %v, want an error saying %q", c.rec.Role, c.rec.Data, err, c.says)
		}
	}
	app := e.dir + "/app.py"
	// A breakpoint outside the working directory is not Berth's: left out.
	err := e.p.Resume(e.run, rec("debugpy", kept{Program: "app.py", Launched: time.Now().Add(-2 * time.Minute),
		Breakpoints: map[string][]int{app: {13}, "/etc/passwd": {1}, e.dir + "/../x.py": {1}}}), nil)
	if err == nil || !strings.Contains(err.Error(), "its time to live (1m0s) passed while Berth was away: it is ended, not resumed") {
		t.Fatalf("Resume past the time to live: %v", err)
	}
	e.ok(`{"operation":"status"}`, "no debug session is running", "the last one (debugpy, app.py) ended: its time to live (1m0s) passed while Berth was away",
		"stored breakpoints in 1 file")
	e.ok(`{"operation":"launch","program":"app.py"}`, "app.py:13 verified", "stopped (breakpoint)")
	e.ok(`{"operation":"terminate"}`, "terminated app.py")

	// A program's name with a control character in it is shown quoted.
	other := newEnv(t, "python", func(c *Config) { c.SessionTTL = time.Minute })
	_ = other.p.Resume(other.run, rec("debugpy", kept{Program: "app.py\nstopped (breakpoint)", Launched: time.Now().Add(-2 * time.Minute)}), nil)
	if got := other.ok(`{"operation":"status"}`, "the last one (debugpy, "); strings.Contains(got, "app.py\nstopped") {
		t.Errorf("status shows the program's name raw: %s", got)
	}
}
