package rpc

import (
	"bytes"
	"context"
	"io"
	"strconv"
	"sync"

	"github.com/coder/websocket"
)

// DefaultMaxMessageSize bounds one message when the caller names no limit.
const DefaultMaxMessageSize = 16 << 20

// Framer reads and writes whole messages on one transport: the part of
// Berth's wire that knows bytes, never JSON-RPC. Read returns a
// *FrameError for a message that was skipped but left the stream in step
// (too large, bad header): the wire answers it and reads on. Any other
// error ends the connection. The body Read returns may be overwritten by
// the next Read; Write does not keep msg.
type Framer interface {
	Read(ctx context.Context) ([]byte, error)
	Write(ctx context.Context, msg []byte) error
	Close() error
}

// FrameError is a message the framer skipped; the stream is still usable.
type FrameError struct {
	Err *Error
	// Reason is the metrics label: "too_large" or "invalid".
	Reason string
}

func (e *FrameError) Error() string { return e.Err.Message }

func tooLarge(n, limit int64) *FrameError {
	return &FrameError{Reason: "too_large", Err: Errorf(CodeInvalidRequest,
		"message of %d bytes exceeds the limit of %d bytes (rpc.max_message_bytes): the message was skipped; split the request or raise the limit", n, limit)}
}

// rereader is a framer that can read a body again as part of the stream
// when it did not parse: a wrong Content-Length cuts a message short or
// runs into the next one, whose header may then be inside the body.
type rereader interface{ reread(body []byte) }

// streamFramer is LSP's framing: "Content-Length: N\r\n" (other headers
// ignored), a blank line, then N bytes of JSON. Its reading is the
// streamReader's.
type streamFramer struct {
	r    *streamReader
	w    io.Writer
	c    io.Closer
	wmu  sync.Mutex
	wbuf []byte // header and body of the message being written, under wmu
}

// NewStreamFramer frames messages on a byte stream with Content-Length
// headers. limit <= 0 means DefaultMaxMessageSize. closer (may be nil) is
// closed by Close.
func NewStreamFramer(r io.Reader, w io.Writer, closer io.Closer, limit int64) Framer {
	if limit <= 0 {
		limit = DefaultMaxMessageSize
	}
	return &streamFramer{r: newStreamReader(r, limit), w: w, c: closer}
}

// Read returns the next message. A message with a bad header is answered
// once (a *FrameError) and the reading resynchronises on the next
// Content-Length header; an error wrapping ErrStreamLost says the stream
// could not be.
func (f *streamFramer) Read(context.Context) ([]byte, error) { return f.r.read() }

// reread takes back a body the connection could not parse: see rereader.
func (f *streamFramer) reread(body []byte) { f.r.reread(body) }

func (f *streamFramer) Write(_ context.Context, msg []byte) error {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	// One write for header and body: the reader wakes once per message.
	buf := append(f.wbuf[:0], "Content-Length: "...)
	buf = strconv.AppendInt(buf, int64(len(msg)), 10)
	buf = append(buf, "\r\n\r\n"...)
	buf = append(buf, msg...)
	_, err := f.w.Write(buf)
	f.wbuf = keep(buf)
	return err
}

// maxKept bounds a buffer a framer keeps for its next message: a rare
// large message should not hold its memory for the connection's life.
const maxKept = 1 << 20

// keep returns b to be used again, or nil when it is too large to keep.
func keep(b []byte) []byte {
	if cap(b) > maxKept {
		return nil
	}
	return b
}

func (f *streamFramer) Close() error {
	if f.c == nil {
		return nil
	}
	return f.c.Close()
}

// wsFramer carries one message per WebSocket text frame.
type wsFramer struct {
	c     *websocket.Conn
	limit int64
	body  bytes.Buffer // the message last read
}

// NewWebSocketFramer frames messages on a WebSocket. A message over the
// limit is read to its end and discarded, so the connection stays usable.
func NewWebSocketFramer(c *websocket.Conn, limit int64) Framer {
	if limit <= 0 {
		limit = DefaultMaxMessageSize
	}
	// The library's own limit closes the connection; ours skips the message.
	c.SetReadLimit(-1)
	return &wsFramer{c: c, limit: limit}
}

func (f *wsFramer) Read(ctx context.Context) ([]byte, error) {
	typ, r, err := f.c.Reader(ctx)
	if err != nil {
		return nil, err
	}
	if f.body.Cap() > maxKept {
		f.body = bytes.Buffer{}
	}
	f.body.Reset()
	if _, err := f.body.ReadFrom(io.LimitReader(r, f.limit+1)); err != nil {
		return nil, err
	}
	body := f.body.Bytes()
	if int64(len(body)) > f.limit {
		n, err := io.Copy(io.Discard, r)
		if err != nil {
			return nil, err
		}
		return nil, tooLarge(int64(len(body))+n, f.limit)
	}
	if typ != websocket.MessageText {
		return nil, &FrameError{Reason: "invalid", Err: Errorf(CodeInvalidRequest,
			"invalid request: binary WebSocket frame; send each JSON-RPC message as one text frame")}
	}
	return body, nil
}

func (f *wsFramer) Write(ctx context.Context, msg []byte) error {
	return f.c.Write(ctx, websocket.MessageText, msg)
}

func (f *wsFramer) Close() error { return f.c.Close(websocket.StatusNormalClosure, "") }
