package bridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestWriteRead(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	frames := []Frame{
		{Type: TypeExecute, Cell: "c1", Code: "print('a\\nb')\n\x1e"},
		{Type: TypeOutput, Cell: "c1", Stream: "stdout", Text: "line\nwith \x1e separator\n"},
		{Type: TypeDisplay, Cell: "c1", Data: map[string]json.RawMessage{"text/plain": json.RawMessage(`"x"`)}},
		{Type: TypeDone, Cell: "c1", Status: StatusOK},
	}
	for _, f := range frames {
		if err := w.Write(f); err != nil {
			t.Fatal(err)
		}
	}
	if n := bytes.Count(buf.Bytes(), []byte("\n")); n != len(frames) {
		t.Fatalf("want one line per frame, got %d lines for %d frames", n, len(frames))
	}
	r := NewReader(&buf)
	for i, want := range frames {
		got, err := r.Read()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		if !bytes.Equal(gj, wj) {
			t.Errorf("frame %d:\n got %s\nwant %s", i, gj, wj)
		}
	}
	if _, err := r.Read(); !errors.Is(err, io.EOF) {
		t.Fatalf("want EOF after the frames, got %v", err)
	}
}

// Bytes that are not a frame come back as stray text, in order, and never
// swallow the frame that follows them on the same line.
func TestStray(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  []Frame
	}{
		{"plain line", "hello\n", []Frame{{Type: TypeStray, Text: "hello\n"}}},
		{"unterminated write before a frame", "partial\x1e{\"type\":\"done\",\"cell\":\"c\"}\n",
			[]Frame{{Type: TypeStray, Text: "partial"}, {Type: TypeDone, Cell: "c"}}},
		{"broken json", "\x1e{\"type\":\n", []Frame{{Type: TypeStray, Text: "\x1e{\"type\":\n"}}},
		{"no type", "\x1e{}\n", []Frame{{Type: TypeStray, Text: "\x1e{}\n"}}},
		{"last line without newline", "\x1e{\"type\":\"ready\",\"version\":1}",
			[]Frame{{Type: TypeReady, Version: 1}}},
		{"a frame cut short does not swallow the next", "\x1e{\"type\":\"output\",\"text\":\"xx\x1e{\"type\":\"done\",\"cell\":\"c\"}\n",
			[]Frame{{Type: TypeStray, Text: "\x1e{\"type\":\"output\",\"text\":\"xx"}, {Type: TypeDone, Cell: "c"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(tt.input))
			for i, want := range tt.want {
				got, err := r.Read()
				if err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				if got.Type != want.Type || got.Text != want.Text || got.Cell != want.Cell || got.Version != want.Version {
					t.Errorf("frame %d: got %+v, want %+v", i, got, want)
				}
			}
			if _, err := r.Read(); !errors.Is(err, io.EOF) {
				t.Fatalf("want EOF, got %v", err)
			}
		})
	}
}

func TestFrameTooLarge(t *testing.T) {
	big := "\x1e" + strings.Repeat("x", MaxFrame+10)
	r := NewReader(strings.NewReader(big))
	if _, err := r.Read(); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("want ErrFrameTooLarge, got %v", err)
	}
}

// TestLongStray: bytes with no separator and no newline come back as
// stray pieces however many there are; a frame after them is still read.
func TestLongStray(t *testing.T) {
	long := strings.Repeat("x", MaxFrame+10)
	r := NewReader(strings.NewReader(long + "\x1e{\"type\":\"done\",\"cell\":\"c\"}\n"))
	var stray int
	for {
		f, err := r.Read()
		if err != nil {
			t.Fatalf("after %d stray bytes: %v", stray, err)
		}
		if f.Type == TypeDone {
			break
		}
		if f.Type != TypeStray || len(f.Text) > 1<<20 {
			t.Fatalf("want stray pieces, got a %s frame of %d bytes", f.Type, len(f.Text))
		}
		stray += len(f.Text)
	}
	if stray != len(long) {
		t.Errorf("%d stray bytes, want %d", stray, len(long))
	}
}

func TestAwaitReady(t *testing.T) {
	tests := []struct {
		name, input, wantErr, wantNoise string
	}{
		{"clean", "\x1e{\"type\":\"ready\",\"version\":1,\"language\":\"python\"}\n", "", ""},
		{"noise first", "warning: site\n\x1e{\"type\":\"ready\",\"version\":1}\n", "", "warning: site\n"},
		{"wrong version", "\x1e{\"type\":\"ready\",\"version\":99}\n", "protocol version 99", ""},
		{"died", "Traceback: boom\n", "ended before it was ready", "Traceback: boom\n"},
		{"noise keeps its tail", strings.Repeat("n", 3*maxNoise) + "last words\n\x1e{\"type\":\"ready\",\"version\":1}\n", "",
			strings.Repeat("n", maxNoise-len("last words\n")) + "last words\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, noise, err := AwaitReady(NewReader(strings.NewReader(tt.input)))
			if tt.wantErr == "" && err != nil {
				t.Fatal(err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("want error containing %q, got %v", tt.wantErr, err)
			}
			if noise != tt.wantNoise {
				t.Errorf("noise %q, want %q", noise, tt.wantNoise)
			}
		})
	}
}

// FuzzRead: no input makes the reader panic or return more frames than
// the input could hold.
func FuzzRead(f *testing.F) {
	f.Add([]byte("\x1e{\"type\":\"done\",\"cell\":\"c\"}\n"))
	f.Add([]byte("junk\x1e{\"type\":\"output\",\"text\":\"a\"}\nmore"))
	f.Add([]byte("\x1e\x1e\n\x1e{\"type\":1}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data))
		for i := 0; i <= len(data)+1; i++ {
			if _, err := r.Read(); err != nil {
				return
			}
		}
		t.Fatalf("reader returned more frames than input lines")
	})
}
