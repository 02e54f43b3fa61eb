package e2e

import (
	"fmt"
	"io"
	"strings"
	"testing"
)

// Over stdio, a header line over 64 KiB, a header block over 8 KiB and a
// bad Content-Length each get one error, and the binary reads on: the
// next request is answered and a run started before lives on (issue 11
// item 5). The binary used to exit 0 at the first two, ending every run.
func TestStdioReadsOnAfterBadHeaders(t *testing.T) {
	r := startRaw(t, []string{testTools})
	r.send(`{"jsonrpc":"2.0","id":1,"method":"run/start","params":{"workdir":` + mustQuote(t.TempDir()) + `}}`)
	runID := r.recv()["result"].(map[string]any)["runId"].(string)

	frame := func(body string) string { return fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body) }
	lost := `{"jsonrpc":"2.0","id":"lost","method":"tools/list","params":{"runId":"` + runID + `"}}`
	raw := "X-Pad: " + strings.Repeat("p", 128<<10) + "\r\n" + frame(lost) +
		strings.Repeat("X-Pad: "+strings.Repeat("p", 90)+"\r\n", 100) + frame(lost) +
		"Content-Length: -1\r\n\r\n" + lost +
		frame(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"runId":"`+runID+`"}}`)
	written := make(chan error, 1)
	go func() { _, err := io.WriteString(r.in, raw); written <- err }()
	var errs []string
	for {
		m := r.recv()
		if _, msg := replyError(m); msg != "" {
			errs = append(errs, msg)
			continue
		}
		if m["id"] != 2.0 {
			t.Fatalf("unexpected reply %v", m)
		}
		break
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	want := []string{"more than 64 KiB; the message was skipped", "a header block of more than 8 KiB", `Content-Length "-1"`}
	if len(errs) != len(want) {
		t.Fatalf("errors %q, want one for each of %q", errs, want)
	}
	for i, w := range want {
		if !strings.Contains(errs[i], w) {
			t.Errorf("error %d: %q, want it to say %q", i, errs[i], w)
		}
	}
}
