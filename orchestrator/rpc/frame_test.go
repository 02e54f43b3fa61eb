package rpc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestStreamFramerSkipsBadFramesAndReadsOn(t *testing.T) {
	stream := "Content-Length: 2\r\n\r\n{}" +
		"\r\n" + // a stray blank line between messages
		"Content-Type: application/json\r\nContent-Length: 4\r\n\r\nnull" +
		"Content-Length: 20\r\n\r\n" + strings.Repeat("x", 20) + // over the limit of 10
		"Content-Length: abc\r\n\r\n{\"x\":1}" + // skipped up to the next header
		"Content-Length: 2\r\n\r\n{}" +
		"X-Other: 1\r\n\r\n{}" +
		"Content-Length: 2\r\n\r\n[]" +
		"garbage\r\nContent-Length: 3\r\n\r\nabc" +
		"Content-Length: 2\r\n\r\n[]"
	f := NewStreamFramer(strings.NewReader(stream), io.Discard, nil, 10)
	want := []struct {
		body   string
		reason string
		msg    string
	}{
		{body: "{}"},
		{body: "null"},
		{reason: "too_large", msg: "message of 20 bytes exceeds the limit of 10 bytes"},
		{reason: "invalid", msg: `Content-Length "abc" is not a non-negative integer; the bytes up to the next Content-Length header were skipped`},
		{body: "{}"},
		{reason: "invalid", msg: "the header has no Content-Length"},
		{body: "[]"},
		{reason: "invalid", msg: `"garbage" is not a header line`},
		{body: "abc"},
		{body: "[]"},
	}
	for i, w := range want {
		b, err := f.Read(context.Background())
		var fe *FrameError
		switch {
		case w.reason == "" && (err != nil || string(b) != w.body):
			t.Fatalf("message %d: got %q, %v; want %q", i, b, err, w.body)
		case w.reason != "" && (!errors.As(err, &fe) || fe.Reason != w.reason || !strings.Contains(fe.Err.Message, w.msg) || fe.Err.Code != CodeInvalidRequest):
			t.Fatalf("message %d: got %q, %v; want %s error containing %q", i, b, err, w.reason, w.msg)
		}
	}
	if _, err := f.Read(context.Background()); err != io.EOF {
		t.Fatalf("at the end: %v, want EOF", err)
	}
}

func TestStreamFramerWritesContentLength(t *testing.T) {
	var out bytes.Buffer
	f := NewStreamFramer(strings.NewReader(""), &out, nil, 0)
	if err := f.Write(context.Background(), []byte(`{"a":"é"}`)); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "Content-Length: 10\r\n\r\n{\"a\":\"é\"}"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestStreamFramerTruncatedBodyEndsTheStream(t *testing.T) {
	f := NewStreamFramer(strings.NewReader("Content-Length: 10\r\n\r\n{}"), io.Discard, nil, 0)
	if _, err := f.Read(context.Background()); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("got %v, want unexpected EOF", err)
	}
}

// FuzzStreamFramer: no input makes the framer panic or return a body
// larger than its limit.
func FuzzStreamFramer(f *testing.F) {
	f.Add([]byte("Content-Length: 2\r\n\r\n{}"))
	f.Add([]byte("Content-Length: -1\r\n\r\n"))
	f.Add([]byte("\r\n\r\nContent-Length: 99999999999\r\n\r\n"))
	f.Add([]byte("Content-Length: 3\r\n\r\n{\"a\":1}Content-Length: 2\r\n\r\n{}"))
	f.Add([]byte("X: " + strings.Repeat("p", 70<<10) + "\r\nContent-Length: 2\r\n\r\n{}"))
	f.Add([]byte(strings.Repeat("X-Pad: 1\r\n", 1000) + "Content-Length: 2\r\n\r\n{}"))
	f.Add([]byte("garbage\ncontent-length: 2\n\n[]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr := NewStreamFramer(bytes.NewReader(b), io.Discard, nil, 64)
		for range 100 {
			body, err := fr.Read(context.Background())
			var fe *FrameError
			if err != nil && !errors.As(err, &fe) {
				return
			}
			if len(body) > 64 {
				t.Fatalf("a body of %d bytes passed the limit of 64", len(body))
			}
		}
	})
}
