// Package boundedio reads what an untrusted process sends with bounded
// memory. Language servers, debug adapters, kernels and the relay run in
// the agent's container, and the libraries that parse their streams
// (go.lsp.dev/jsonrpc2, go-dap) read a header line to its end however long
// it is and allocate whatever body a header declares. Framed goes in
// front of those libraries: it passes the bytes through unchanged and ends
// the stream with an *Error the moment a header line, a header block or a
// declared body passes its limit, before the library behind it has
// buffered more than the limit. Buffer keeps the first bytes of an output
// that may not end, and counts the rest.
package boundedio

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The kinds of limit an *Error reports; test with errors.Is.
var (
	// ErrLine: a header line with no end within its limit.
	ErrLine = errors.New("header line too long")
	// ErrHeader: a header block with no blank line within its limit.
	ErrHeader = errors.New("header block too large")
	// ErrBody: a Content-Length over the limit.
	ErrBody = errors.New("message too large")
	// ErrFraming: a header the framing cannot follow (no or a bad
	// Content-Length, a line end other than "\r\n" where one is required).
	ErrFraming = errors.New("malformed header")
)

// Error is a stream refused at a limit. Its message says what was refused
// and the limit; the caller adds whose stream it was and what to do.
type Error struct {
	Kind  error  // ErrLine, ErrHeader, ErrBody or ErrFraming
	Size  int64  // the declared length (ErrBody); 0 when not known
	Limit int64  // the limit passed (0 for ErrFraming)
	What  string // ErrFraming: what was wrong
}

func (e *Error) Error() string {
	switch e.Kind {
	case ErrLine:
		return fmt.Sprintf("a header line with no line end within %s", Size(e.Limit))
	case ErrHeader:
		return fmt.Sprintf("a header block with no blank line within %s", Size(e.Limit))
	case ErrBody:
		return fmt.Sprintf("a message of %s (Content-Length %d), over the limit of %s", Size(e.Size), e.Size, Size(e.Limit))
	default:
		return "a malformed header: " + e.What
	}
}

func (e *Error) Unwrap() error { return e.Kind }

// Size renders a byte count for a message: "4 MiB", "1.5 GiB", "512 bytes".
func Size(n int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB"}
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " bytes"
	}
	v, u := float64(n)/1024, 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	return strings.TrimSuffix(strconv.FormatFloat(v, 'f', 1, 64), ".0") + " " + units[u]
}

// Limits bound one Content-Length framed stream (the LSP and DAP base
// protocol: header lines, a blank line, then Content-Length bytes).
type Limits struct {
	// Line bounds one header line, its line end included.
	Line int
	// Header bounds one header block, its blank line included.
	Header int
	// Body bounds the Content-Length a header may declare.
	Body int64
	// CRLF requires every header line to end with "\r\n": go-dap reads a
	// header up to its first '\r', so a header of lines ended by '\n'
	// alone would be read past every limit here.
	CRLF bool
}

// DefaultLine and DefaultHeader are the header limits of Berth's own
// stream (orchestrator/rpc): a real header is one or two short lines.
const (
	DefaultLine   = 4 << 10
	DefaultHeader = 8 << 10
)

// Framed passes a Content-Length framed stream through, checking its
// headers as they go by. It never holds more than one header line
// (Limits.Line bytes); a body passes through uncopied.
type Framed struct {
	r io.Reader
	l Limits

	body   int64  // bytes of the current body still to pass
	line   []byte // the current header line so far
	block  int    // bytes of the current header block so far
	length int64  // the block's Content-Length; -1 when none yet
	cr     bool   // the last header byte was '\r'
	err    error  // sticky: once refused, always refused
}

// NewFramed returns a reader of r that enforces l. Zero limits take the
// defaults (DefaultLine, DefaultHeader; Body must be given).
func NewFramed(r io.Reader, l Limits) *Framed {
	if l.Line <= 0 {
		l.Line = DefaultLine
	}
	if l.Header <= 0 {
		l.Header = DefaultHeader
	}
	return &Framed{r: r, l: l, length: -1, line: make([]byte, 0, min(l.Line, 256))}
}

// Err is the *Error that ended the stream, or nil.
func (f *Framed) Err() error { return f.err }

// Read reads from the underlying reader and returns the bytes up to the
// first that breaks a limit, with the *Error; every later Read returns
// the error again.
func (f *Framed) Read(p []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	n, err := f.r.Read(p)
	if k, ferr := f.scan(p[:n]); ferr != nil {
		f.err = ferr
		return k, ferr
	}
	return n, err
}

// scan follows the framing through b and returns how many of its bytes
// are fine, and the error at the first that is not.
func (f *Framed) scan(b []byte) (int, error) {
	i := 0
	for i < len(b) {
		if f.body > 0 {
			k := int(min(f.body, int64(len(b)-i)))
			f.body -= int64(k)
			i += k
			continue
		}
		c := b[i]
		f.block++
		if f.l.CRLF && f.cr != (c == '\n') {
			if f.cr {
				return i, &Error{Kind: ErrFraming, What: `a '\r' not followed by '\n' in a header (header lines end with "\r\n")`}
			}
			return i, &Error{Kind: ErrFraming, What: `a '\n' without '\r' before it in a header (header lines end with "\r\n")`}
		}
		f.cr = c == '\r'
		if c != '\n' {
			if len(f.line)+1 >= f.l.Line { // the line end would not fit
				return i, &Error{Kind: ErrLine, Limit: int64(f.l.Line)}
			}
			if f.block >= f.l.Header {
				return i, &Error{Kind: ErrHeader, Limit: int64(f.l.Header)}
			}
			f.line = append(f.line, c)
			i++
			continue
		}
		i++
		if err := f.endLine(); err != nil {
			return i - 1, err
		}
	}
	return i, nil
}

// endLine takes a whole header line: a Content-Length is noted, a blank
// line ends the block and starts its body.
func (f *Framed) endLine() error {
	text := strings.TrimSuffix(string(f.line), "\r")
	f.line = f.line[:0]
	if text == "" {
		n := f.length
		f.block, f.length = 0, -1
		switch {
		case n < 0:
			return &Error{Kind: ErrFraming, What: "a header block without Content-Length"}
		case n > f.l.Body:
			return &Error{Kind: ErrBody, Size: n, Limit: f.l.Body}
		}
		f.body = n
		return nil
	}
	name, value, ok := strings.Cut(text, ":")
	if !ok || !strings.EqualFold(strings.TrimSpace(name), "Content-Length") {
		return nil // another header: the library judges it
	}
	value = strings.TrimSpace(value)
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil || n < 0 {
		if len(value) > 40 {
			value = value[:40] + "..."
		}
		return &Error{Kind: ErrFraming, What: fmt.Sprintf("Content-Length %q is not a byte count", value)}
	}
	f.length = n
	return nil
}

// Buffer is an io.Writer that keeps the first Max bytes written to it and
// counts the rest: the output of a command run in a container, which may
// print without end.
type Buffer struct {
	Max     int
	buf     bytes.Buffer
	dropped int64
}

// Write keeps what fits and drops the rest; it never fails, so a copy
// into it reads its source to the end.
func (b *Buffer) Write(p []byte) (int, error) {
	if room := b.Max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(room, len(p))])
		b.dropped += int64(max(0, len(p)-room))
	} else {
		b.dropped += int64(len(p))
	}
	return len(p), nil
}

// Bytes is what was kept.
func (b *Buffer) Bytes() []byte { return b.buf.Bytes() }

// Dropped is how many bytes were not kept.
func (b *Buffer) Dropped() int64 { return b.dropped }

// String is what was kept, followed by a note of what was dropped.
func (b *Buffer) String() string {
	if b.dropped == 0 {
		return b.buf.String()
	}
	return fmt.Sprintf("%s... (%s more not kept)", b.buf.String(), Size(b.dropped))
}
