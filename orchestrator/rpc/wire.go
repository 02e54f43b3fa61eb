package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"unicode/utf8"

	"go.lsp.dev/jsonrpc2"
)

// wire is the thin stream of Berth's own in front of go.lsp.dev/jsonrpc2.
// The library ends the connection at the first message it cannot decode,
// while Berth promises that a bad message is answered and never closes
// its connection. So wire reads whole messages from a Framer (which skips
// oversized ones and, on stdio, resynchronises after a bad header),
// decodes each with jsonrpc2.DecodeMessage, the one check of a message,
// answers what it refuses in Berth's words (-32700, -32600), and hands
// the library the rest.
type wire struct {
	f        Framer
	onReject func(reason string) // may be nil
	onEnd    func()              // called once, when the reading has ended
	log      *slog.Logger

	endOnce   sync.Once
	closeOnce sync.Once
	closeErr  error
}

var _ jsonrpc2.Stream = (*wire)(nil)

// Read returns the next message the library decodes, answering the
// others. An error ends the connection: the peer went away, the wire was
// closed, or (stdio) the stream is out of step beyond recovery.
func (w *wire) Read(ctx context.Context) (jsonrpc2.Message, int64, error) {
	for {
		body, err := w.f.Read(ctx)
		if err != nil {
			var fe *FrameError
			if errors.As(err, &fe) {
				w.refuse(ctx, jsonrpc2.ID{}, fe.Reason, fe.Err)
				continue
			}
			w.endOnce.Do(w.onEnd)
			return nil, 0, err
		}
		msg, err := jsonrpc2.DecodeMessage(body)
		if err == nil {
			return msg, int64(len(body)), nil
		}
		id, reason, e := refusal(body)
		w.refuse(ctx, id, reason, e)
		if rr, ok := w.f.(rereader); ok && e.Code == CodeParseError {
			// Answered once; the next message may start inside it.
			rr.reread(body)
		}
	}
}

// refusal words the library's refusal of body. JSON-RPC 2.0 calls what is
// not JSON a parse error and JSON that is not a request or response
// object an invalid request; JSON's own reading tells the two apart (the
// library calls a string or a number a parse error, an array an invalid
// request). An invalid request is answered under its id when the id can be
// read, so its sender can tell which request failed.
func refusal(body []byte) (id jsonrpc2.ID, reason string, e *Error) {
	if !json.Valid(body) {
		return id, "parse", Errorf(CodeParseError, "parse error: the message is not valid JSON; send one JSON-RPC 2.0 object per message")
	}
	if k := kindOf(body); k != "object" {
		return id, "invalid", Errorf(CodeInvalidRequest, "invalid request: the message must be a JSON object (batches are not supported), got %s %s; send one JSON-RPC 2.0 object per message", article(k), k)
	}
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(body, &m) == nil {
		id, _ = readID(m.ID)
	}
	return id, "invalid", Errorf(CodeInvalidRequest, `invalid request: the message is not JSON-RPC 2.0: "jsonrpc" must be "2.0"; a request has a string "method" and, unless it is a notification, an "id" that is a string or an integer (digits only, within 64 bits); a response has an "id" and exactly one of "result" and "error" {code, message}, never a "method"`)
}

// readID reads a request id: a string, or an integer within 64 bits.
func readID(raw json.RawMessage) (jsonrpc2.ID, bool) {
	var s string
	var n int64
	switch {
	case len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil:
		return jsonrpc2.NewStringID(s), true
	case len(raw) > 0 && raw[0] != 'n' && json.Unmarshal(raw, &n) == nil:
		return jsonrpc2.NewNumberID(n), true
	}
	return jsonrpc2.ID{}, false
}

// Write frames one message. JSON text is UTF-8 (RFC 8259), and Berth
// writes no other: the library echoes a string id's bytes as they came,
// so bytes that are not UTF-8 are written as U+FFFD.
func (w *wire) Write(ctx context.Context, msg jsonrpc2.Message) (int64, error) {
	bp := writeBuffers.Get().(*[]byte)
	b := jsonrpc2.AppendMessage((*bp)[:0], msg)
	if !utf8.Valid(b) {
		b = bytes.ToValidUTF8(b, []byte("\uFFFD"))
	}
	err := w.f.Write(ctx, b)
	*bp = keep(b)
	writeBuffers.Put(bp)
	if err != nil {
		return 0, err
	}
	return int64(len(b)), nil
}

// writeBuffers hold messages being encoded: a framer does not keep what
// it writes, so the buffer serves the next message, of any connection.
var writeBuffers = sync.Pool{New: func() any { return new([]byte) }}

// Close closes the framer once: both Berth (to end a connection at once)
// and the library (once it has drained) close it.
func (w *wire) Close() error {
	w.closeOnce.Do(func() { w.closeErr = w.f.Close() })
	return w.closeErr
}

// refuse answers a message that was refused.
func (w *wire) refuse(ctx context.Context, id jsonrpc2.ID, reason string, e *Error) {
	if w.onReject != nil {
		w.onReject(reason)
	}
	if _, err := w.Write(ctx, jsonrpc2.NewResponse(id, nil, e.toWire())); err != nil {
		w.log.Debug("rpc: reply to a refused message not written", "err", err)
	}
}

// kindOf names the JSON type of a value for error messages, from its
// first byte: callers pass JSON that was already read.
func kindOf(b []byte) string {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

func article(kind string) string {
	if kind == "array" || kind == "object" {
		return "an"
	}
	return "a"
}
