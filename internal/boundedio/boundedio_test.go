package boundedio

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-dap"
	"go.lsp.dev/jsonrpc2"
)

// endless is a reader that returns prefix once, then fill for ever, and
// counts what it gave.
type endless struct {
	prefix []byte
	fill   byte
	n      int64
}

func (e *endless) Read(p []byte) (int, error) {
	k := copy(p, e.prefix)
	e.prefix = e.prefix[k:]
	for i := k; i < len(p); i++ {
		p[i] = e.fill
	}
	e.n += int64(len(p))
	return len(p), nil
}

// allocated runs f and returns the bytes it allocated on the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

var lspLimits = Limits{Body: 64 << 20}
var dapLimits = Limits{Body: 4 << 20, CRLF: true}

func frame(body string) string { return fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body) }

// Good messages pass unchanged, in whatever pieces they are read, to both
// libraries the readers stand in front of.
func TestFramedPassesMessagesThrough(t *testing.T) {
	bodies := []string{`{"jsonrpc":"2.0","method":"a"}`, `{"jsonrpc":"2.0","id":1,"result":"` + strings.Repeat("x", 100000) + `"}`}
	wire := frame(bodies[0]) + "Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n" + frame(bodies[1])
	for _, one := range []bool{false, true} {
		var src io.Reader = strings.NewReader(wire)
		if one {
			src = iotest.OneByteReader(src)
		}
		s := jsonrpc2.NewHeaderStream(rwc{NewFramed(src, lspLimits)})
		for i := range bodies {
			msg, _, err := s.Read(context.Background())
			if err != nil {
				t.Fatalf("one byte at a time %v: message %d: %v", one, i, err)
			}
			_ = msg
		}
		if _, _, err := s.Read(context.Background()); err != io.EOF {
			t.Errorf("after the last message: %v, want EOF", err)
		}
	}
	dapWire := frame(`{"seq":1,"type":"event","event":"initialized"}`) + frame(`{"seq":2,"type":"event","event":"x"}`)
	r := bufio.NewReader(NewFramed(iotest.HalfReader(strings.NewReader(dapWire)), dapLimits))
	for i := range 2 {
		if _, err := dap.ReadBaseMessage(r); err != nil {
			t.Fatalf("DAP message %d: %v", i, err)
		}
	}
}

type rwc struct{ io.Reader }

func (rwc) Write(p []byte) (int, error) { return len(p), nil }
func (rwc) Close() error                { return nil }

// issue 24 item 1: a header line that never ends ("Content-Length: 999..."
// with no line end) is refused within the line limit, by jsonrpc2's
// ReadBytes('\n') and go-dap's ReadString('\r') alike; without the reader
// both buffer it without bound.
func TestHeaderLineWithoutEndIsCapped(t *testing.T) {
	for _, c := range []struct {
		name string
		read func(io.Reader) error
		l    Limits
	}{
		{"jsonrpc2", func(r io.Reader) error {
			_, _, err := jsonrpc2.NewHeaderStream(rwc{r}).Read(context.Background())
			return err
		}, lspLimits},
		{"go-dap", func(r io.Reader) error { _, err := dap.ReadBaseMessage(bufio.NewReader(r)); return err }, dapLimits},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := &endless{prefix: []byte("Content-Length: "), fill: '9'}
			var err error
			alloc := allocated(func() { err = c.read(NewFramed(src, c.l)) })
			if !errors.Is(err, ErrLine) {
				t.Fatalf("err = %v, want ErrLine", err)
			}
			if !strings.Contains(err.Error(), "a header line with no line end within 4 KiB") {
				t.Errorf("message: %v", err)
			}
			t.Logf("read %d bytes, allocated %d, for a header line that never ends", src.n, alloc)
			if src.n > 64<<10 || alloc > 1<<20 {
				t.Errorf("read %d bytes and allocated %d before refusing: want under 64 KiB and 1 MiB", src.n, alloc)
			}
		})
	}
}

// A header block of endless short lines (no blank line) is refused at the
// block limit.
func TestHeaderBlockWithoutEndIsCapped(t *testing.T) {
	lines := io.MultiReader(strings.NewReader("Content-Length: 5\r\n"), &repeat{s: "X-Pad: yes\r\n"})
	_, _, err := jsonrpc2.NewHeaderStream(rwc{NewFramed(lines, lspLimits)}).Read(context.Background())
	if !errors.Is(err, ErrHeader) || !strings.Contains(err.Error(), "within 8 KiB") {
		t.Fatalf("err = %v, want ErrHeader within 8 KiB", err)
	}
}

type repeat struct {
	s string
	i int
}

func (r *repeat) Read(p []byte) (int, error) {
	for n := range p {
		p[n] = r.s[r.i%len(r.s)]
		r.i++
	}
	return len(p), nil
}

// issue 24 item 2: a declared body over the limit is refused when its
// header ends, before the library allocates it (jsonrpc2 would allocate up
// to 1 GiB at once).
func TestDeclaredBodyOverLimitIsRefusedBeforeItIsAllocated(t *testing.T) {
	src := &endless{prefix: []byte("Content-Length: 1073741824\r\n\r\n{"), fill: ' '}
	var err error
	alloc := allocated(func() {
		_, _, err = jsonrpc2.NewHeaderStream(rwc{NewFramed(src, lspLimits)}).Read(context.Background())
	})
	var e *Error
	if !errors.As(err, &e) || e.Kind != ErrBody || e.Size != 1<<30 || e.Limit != 64<<20 {
		t.Fatalf("err = %#v, want ErrBody of 1 GiB over 64 MiB", err)
	}
	if want := "a message of 1 GiB (Content-Length 1073741824), over the limit of 64 MiB"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	if alloc > 1<<20 {
		t.Errorf("allocated %d bytes refusing a declared 1 GiB", alloc)
	}
	// A body at the limit passes.
	body := `"` + strings.Repeat("x", 998) + `"`
	r := NewFramed(strings.NewReader(frame(body)), Limits{Body: 1000})
	if b, err := io.ReadAll(r); err != nil || string(b) != frame(body) {
		t.Errorf("a body at the limit: %v", err)
	}
}

// DAP's reader reads a header to its first '\r': lines ended by '\n'
// alone are refused, or a stream of them would be read past every limit.
func TestDAPHeaderLinesMustEndWithCRLF(t *testing.T) {
	for _, wire := range []string{"Content-Length: 2\n\n{}", "Content-Length: 2\r\r\n\r\n{}"} {
		_, err := io.ReadAll(NewFramed(strings.NewReader(wire), dapLimits))
		if !errors.Is(err, ErrFraming) || !strings.Contains(err.Error(), `header lines end with "\r\n"`) {
			t.Errorf("%q: err = %v, want ErrFraming", wire, err)
		}
	}
	// jsonrpc2 reads to '\n': there a bare '\n' ends a line.
	if _, err := io.ReadAll(NewFramed(strings.NewReader("Content-Length: 2\n\n{}"), lspLimits)); err != nil {
		t.Errorf("a bare '\\n' without CRLF required: %v", err)
	}
}

// A header without a usable Content-Length cannot be followed.
func TestHeaderWithoutContentLengthIsRefused(t *testing.T) {
	for wire, want := range map[string]string{
		"Content-Type: x\r\n\r\n{}":   "a header block without Content-Length",
		"Content-Length: 1e9\r\n\r\n": `Content-Length "1e9" is not a byte count`,
		"Content-Length: -5\r\n\r\n":  `Content-Length "-5" is not a byte count`,
	} {
		_, err := io.ReadAll(NewFramed(strings.NewReader(wire), lspLimits))
		if !errors.Is(err, ErrFraming) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", wire, err, want)
		}
	}
}

// The refusal is sticky, and the bytes before it were passed.
func TestRefusalIsSticky(t *testing.T) {
	wire := frame("{}") + "Content-Length: 99999999999\r\n\r\n"
	f := NewFramed(strings.NewReader(wire), lspLimits)
	b, err := io.ReadAll(f)
	if !errors.Is(err, ErrBody) || string(b) != frame("{}")+"Content-Length: 99999999999\r\n\r" {
		t.Fatalf("read %q, %v", b, err)
	}
	if _, err2 := f.Read(make([]byte, 10)); err2 != err || f.Err() != err {
		t.Errorf("a second read: %v", err2)
	}
}

// Buffer keeps Max bytes and says how many it dropped.
func TestBufferKeepsItsMax(t *testing.T) {
	b := &Buffer{Max: 5}
	for range 3 {
		if n, err := b.Write([]byte("abcd")); n != 4 || err != nil {
			t.Fatal(n, err)
		}
	}
	if string(b.Bytes()) != "abcda" || b.Dropped() != 7 || b.String() != "abcda... (7 bytes more not kept)" {
		t.Errorf("kept %q, dropped %d: %s", b.Bytes(), b.Dropped(), b)
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{5: "5 bytes", 4096: "4 KiB", 1536: "1.5 KiB", 64 << 20: "64 MiB", 1 << 30: "1 GiB"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}
