package rpc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// streamReader reads Content-Length framed messages from a byte stream
// and keeps its place when the framing is wrong. A message whose extent
// is known (a valid Content-Length) is skipped by its length whatever
// else is wrong with it. When the extent is not known (no usable
// Content-Length, a line where a header belongs, a body that did not
// parse because its length was wrong), the reader is out of step: it
// reports that once, then looks for the next "Content-Length:" in the
// bytes that follow, the body that did not parse included, and reads on
// from there. Only a stream that shows no header within the message limit
// cannot be recovered.
//
// It is the stdio transport's own framing layer: it knows headers and
// byte counts, never JSON-RPC.
type streamReader struct {
	src   io.Reader
	buf   []byte // buf[r:w] has been read from src and not consumed
	r, w  int
	limit int64 // the largest body
	// lost says the stream is out of step: the next read looks for a
	// header first. quiet says the trouble was reported already (or a
	// body that did not parse was): what is skipped while finding the
	// next good header gets no further error.
	lost, quiet bool
	last        []byte // the last body read, overwritten by the next
}

const (
	// maxHeaderBytes bounds one header block; a larger one is skipped.
	maxHeaderBytes = 8 << 10
	// maxHeaderLine bounds one header line kept to be read; the rest of
	// a longer one is skipped.
	maxHeaderLine = 64 << 10
	// marker starts the header a lost stream looks for (any case).
	marker = "content-length:"
)

// ErrStreamLost is returned (wrapped) by a stream reader that found no
// header where one must be: the connection cannot be recovered.
var ErrStreamLost = errors.New("the stream cannot be resynchronised")

func newStreamReader(src io.Reader, limit int64) *streamReader {
	return &streamReader{src: src, buf: make([]byte, maxHeaderLine), limit: limit}
}

// read returns the next message's body (valid until the next read), or
// a *FrameError for a message that was skipped (the stream is still
// usable), or the error that ends the stream.
func (s *streamReader) read() ([]byte, error) {
	for {
		if s.lost {
			if err := s.resync(); err != nil {
				return nil, err
			}
		}
		h, err := s.header()
		if err != nil {
			return nil, err
		}
		switch {
		case h.problem != "" && h.length >= 0:
			// Its extent is known: skip it, and answer it.
			s.quiet = false
			if err := s.skip(h.length); err != nil {
				return nil, err
			}
			return nil, badHeader(h.problem)
		case h.problem != "":
			s.lost = true
			if s.quiet {
				continue
			}
			s.quiet = true
			return nil, badHeader(h.problem + "; the bytes up to the next Content-Length header were skipped")
		}
		s.quiet = false
		if h.length > s.limit {
			if err := s.skip(h.length); err != nil {
				return nil, err
			}
			return nil, tooLarge(h.length, s.limit)
		}
		return s.body(h.length)
	}
}

// reread takes back a body that did not parse: its Content-Length was
// probably wrong, so the next message may start inside it. The caller
// has answered it; finding the next header is quiet.
func (s *streamReader) reread(body []byte) {
	buf := make([]byte, max(len(body)+s.w-s.r, maxHeaderLine))
	n := copy(buf, body)
	n += copy(buf[n:], s.buf[s.r:s.w])
	s.buf, s.r, s.w = buf, 0, n
	s.lost, s.quiet = true, true
}

func badHeader(problem string) *FrameError {
	return &FrameError{Reason: "invalid", Err: Errorf(CodeInvalidRequest,
		"invalid header: %s; frame each message as \"Content-Length: N\\r\\n\\r\\n\" followed by N bytes of JSON", problem)}
}

// header is one header block as read: the body's length (-1 when it is
// not known) and what was wrong with it.
type header struct {
	length  int64
	problem string
}

// header reads one header block, up to and including its blank line. A
// line that is not a header is left unread and ends the block with a
// problem and no length: the stream is out of step there.
func (s *streamReader) header() (header, error) {
	h := header{length: -1}
	size := 0
	badLength := false // a later Content-Length does not mend a bad one
	for {
		line, whole, err := s.peekLine()
		if err != nil {
			if err == io.EOF && size > 0 {
				return h, io.ErrUnexpectedEOF
			}
			return h, err
		}
		if !whole {
			if _, ok := headerName(line); !ok {
				return header{length: -1, problem: "a line of more than 64 KiB where a header belongs"}, nil
			}
			n, err := s.skipLine()
			if err != nil {
				return h, err
			}
			size += n
			if h.problem == "" {
				h.problem = fmt.Sprintf("a header line of %d bytes, more than 64 KiB; the message was skipped", n)
			}
			continue
		}
		text := strings.TrimRight(string(line), "\r\n")
		if text == "" {
			s.r += len(line)
			if size == 0 {
				continue // a stray blank line between messages
			}
			break
		}
		name, ok := headerName(line)
		if !ok {
			return header{length: -1, problem: fmt.Sprintf("%q is not a header line (\"Name: value\")", clip(text))}, nil
		}
		s.r += len(line)
		size += len(line)
		if size > int(s.limit)+maxHeaderBytes {
			return h, fmt.Errorf("%w: a header block of more than %d bytes", ErrStreamLost, size)
		}
		if size > maxHeaderBytes && h.problem == "" {
			h.problem = "a header block of more than 8 KiB; the message was skipped"
		}
		if !strings.EqualFold(name, "Content-Length") {
			continue
		}
		_, value, _ := strings.Cut(text, ":")
		value = strings.TrimSpace(value)
		n, err := strconv.ParseInt(value, 10, 64)
		switch {
		case err != nil || n < 0:
			h.problem = fmt.Sprintf("Content-Length %q is not a non-negative integer", clip(value))
			badLength = true
		case h.length >= 0 && n != h.length:
			h.problem = fmt.Sprintf("two Content-Length headers disagree (%d and %d)", h.length, n)
			badLength = true
		default:
			h.length = n
		}
	}
	if badLength {
		h.length = -1
	}
	if h.length < 0 && h.problem == "" {
		h.problem = "the header has no Content-Length"
	}
	return h, nil
}

// headerName returns the name of a header line, when the line starts with
// one: an HTTP token and a colon. The tail of a body read short (JSON)
// never does: it holds a quote, a brace or a bracket first.
func headerName(line []byte) (string, bool) {
	i := bytes.IndexByte(line, ':')
	if i <= 0 {
		return "", false
	}
	name := bytes.TrimSpace(line[:i])
	if len(name) == 0 {
		return "", false
	}
	for _, c := range name {
		if !isTokenChar(c) {
			return "", false
		}
	}
	return string(name), true
}

// isTokenChar: RFC 9110's tchar.
func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// clip shortens what an error message quotes of the stream.
func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// resync finds the next "Content-Length:" (any case), wherever it is on
// its line, and leaves the reader at it. A body read short is followed by
// its tail and then, on the same line, the next header.
func (s *streamReader) resync() error {
	skipped := int64(0)
	for {
		if i := indexFold(s.buf[s.r:s.w], marker); i >= 0 {
			s.r += i
			s.lost = false
			return nil
		}
		// Keep what could be the start of a marker cut by the buffer's end.
		keep := min(len(marker)-1, s.w-s.r)
		skipped += int64(s.w - s.r - keep)
		s.r = s.w - keep
		if skipped > s.limit+maxHeaderBytes {
			return fmt.Errorf("%w: no Content-Length header in the %d bytes after a malformed message", ErrStreamLost, skipped)
		}
		if err := s.fill(); err != nil {
			return err
		}
	}
}

// indexFold is the index of the first match of lower (a lower-case ASCII
// string) in b in any case, or -1.
func indexFold(b []byte, lower string) int {
	first, upper := lower[0], lower[0]-'a'+'A'
	for i := 0; i+len(lower) <= len(b); i++ {
		if (b[i] == first || b[i] == upper) && bytes.EqualFold(b[i:i+len(lower)], []byte(lower)) {
			return i
		}
	}
	return -1
}

// peekLine returns the next line, up to and including its '\n', without
// consuming it. whole is false when no '\n' came within maxHeaderLine
// bytes; the line is then those bytes.
func (s *streamReader) peekLine() (line []byte, whole bool, err error) {
	scanned := 0
	for {
		if i := bytes.IndexByte(s.buf[s.r+scanned:s.w], '\n'); i >= 0 {
			return s.buf[s.r : s.r+scanned+i+1], true, nil
		}
		scanned = s.w - s.r
		if scanned >= maxHeaderLine {
			return s.buf[s.r : s.r+maxHeaderLine], false, nil
		}
		if err := s.fill(); err != nil {
			if err == io.EOF && s.w > s.r {
				return nil, false, io.ErrUnexpectedEOF
			}
			return nil, false, err
		}
	}
}

// skipLine consumes the rest of a line too long to keep, and says how
// many bytes it had.
func (s *streamReader) skipLine() (int, error) {
	n := 0
	for {
		if i := bytes.IndexByte(s.buf[s.r:s.w], '\n'); i >= 0 {
			s.r += i + 1
			return n + i + 1, nil
		}
		n += s.w - s.r
		s.r = s.w
		if int64(n) > s.limit+maxHeaderBytes {
			return n, fmt.Errorf("%w: a header line of more than %d bytes", ErrStreamLost, n)
		}
		if err := s.fill(); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return n, err
		}
	}
}

// fill reads more of the stream into the buffer, moving what is unread
// to its start first; io.EOF when the stream has ended.
func (s *streamReader) fill() error {
	if s.r > 0 {
		if len(s.buf) > maxHeaderLine && s.w-s.r <= maxHeaderLine {
			// A body taken back (reread) is behind us: give back its room.
			s.buf = append(make([]byte, 0, maxHeaderLine), s.buf[s.r:s.w]...)[:maxHeaderLine]
			s.w -= s.r
		} else {
			s.w = copy(s.buf, s.buf[s.r:s.w])
		}
		s.r = 0
	}
	// As bufio does, a reader that keeps returning nothing is an error.
	for range 100 {
		n, err := s.src.Read(s.buf[s.w:])
		s.w += n
		if n > 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return io.ErrNoProgress
}

// body reads n bytes into the body buffer, which the next body reuses.
func (s *streamReader) body(n int64) ([]byte, error) {
	if int64(cap(s.last)) < n {
		s.last = make([]byte, n)
	}
	b := s.last[:n]
	s.last = keep(s.last)
	k := copy(b, s.buf[s.r:s.w])
	s.r += k
	if _, err := io.ReadFull(s.src, b[k:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return b, nil
}

// skip discards n bytes.
func (s *streamReader) skip(n int64) error {
	k := int(min(n, int64(s.w-s.r)))
	s.r += k
	if _, err := io.CopyN(io.Discard, s.src, n-int64(k)); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	return nil
}
