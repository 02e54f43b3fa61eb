package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"go.lsp.dev/jsonrpc2"
)

// wire is the one stream of Berth's own in front of go.lsp.dev/jsonrpc2.
// The library stops reading at the first message it cannot decode and
// answers none of them, while Berth promises that a bad message is
// answered and never closes its connection. So wire reads whole messages
// from a Framer (which skips oversized ones and, on stdio, resynchronises
// after a bad header), checks each against JSON-RPC 2.0, answers a bad
// one itself (-32700, -32600) with words a harness author can act on, and
// hands the library only messages it has decoded.
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

// Read returns the next message that passes the checks, answering the
// others. An error ends the connection: the peer went away, the wire was
// closed, or (stdio) the stream is out of step beyond recovery.
func (w *wire) Read(ctx context.Context) (jsonrpc2.Message, int64, error) {
	for {
		body, err := w.f.Read(ctx)
		if err != nil {
			var fe *FrameError
			if errors.As(err, &fe) {
				w.refuse(ctx, &refusal{reason: fe.Reason, err: fe.Err})
				continue
			}
			w.endOnce.Do(w.onEnd)
			return nil, 0, err
		}
		msg, r := decode(body)
		if r == nil {
			return msg, int64(len(body)), nil
		}
		w.refuse(ctx, r)
		if rr, ok := w.f.(rereader); ok && r.err.Code == CodeParseError {
			// Answered once; the next message may start inside it.
			rr.reread(body)
		}
	}
}

// Write frames one message.
func (w *wire) Write(ctx context.Context, msg jsonrpc2.Message) (int64, error) {
	bp := writeBuffers.Get().(*[]byte)
	b := jsonrpc2.AppendMessage((*bp)[:0], msg)
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

// refuse answers a message that did not pass, or logs one that is not
// answered.
func (w *wire) refuse(ctx context.Context, r *refusal) {
	if r.drop {
		w.log.Warn("rpc: the peer reports an error about a message it could not read", "code", r.err.Code, "message", r.err.Message)
		return
	}
	if w.onReject != nil {
		w.onReject(r.reason)
	}
	b := jsonrpc2.AppendMessage(nil, jsonrpc2.NewResponse(r.id, nil, r.err.toWire()))
	if err := w.f.Write(ctx, b); err != nil {
		w.log.Debug("rpc: reply to a refused message not written", "err", err)
	}
}

// refusal is what becomes of a message that does not pass: an error reply
// under id (null when the message's own id cannot be echoed), or, for a
// response the peer sent with no id, a log line (drop): answering an error
// with an error could go back and forth for ever.
type refusal struct {
	id     jsonrpc2.ID
	err    *Error
	reason string // the metrics label: "parse", "invalid" or "too_large"
	drop   bool
}

func invalid(id jsonrpc2.ID, format string, a ...any) *refusal {
	return &refusal{id: id, reason: "invalid", err: Errorf(CodeInvalidRequest, format, a...)}
}

// jsonOptions read JSON as encoding/json does: a repeated member counts
// once, its last value (as the library reads it too), and a string that is
// not UTF-8 is JSON all the same; only an id must be UTF-8 (checkID).
var jsonOptions = jsonv2.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// members are the spans of a message's top-level members, each the last
// of its name, matched on the name as written, as the library matches
// them: "\u0069d" is not "id" to it, so it is not to Berth either.
type members struct {
	jsonrpc, id, method, params, errobj   []byte
	hasID, hasMethod, hasResult, hasError bool
}

// decode checks one message and decodes it with the library, or says how
// to refuse it. What it passes, the library decodes (FuzzDecode holds it
// to that); whatever the library still refuses is refused here too, so
// the library's reading never stops at a message.
func decode(body []byte) (jsonrpc2.Message, *refusal) {
	i := skipSpace(body)
	if i == len(body) || body[i] != '{' {
		if err := syntaxError(body); err != nil {
			return nil, parseError(err)
		}
		return nil, invalid(jsonrpc2.ID{}, "invalid request: the message must be a JSON object (batches are not supported); got %s", kindOf(body))
	}
	var m members
	err := eachMember(body, func(name, v []byte) {
		switch string(name) {
		case `"jsonrpc"`:
			m.jsonrpc = v
		case `"id"`:
			m.id, m.hasID = v, true
		case `"method"`:
			m.method, m.hasMethod = v, true
		case `"params"`:
			m.params = v
		case `"result"`:
			m.hasResult = true
		case `"error"`:
			m.errobj, m.hasError = v, true
		}
	})
	if err != nil {
		if id, ok := deepID(err, body); ok {
			wid, r := checkID(id)
			if r != nil {
				return nil, r
			}
			return nil, invalid(wid, "invalid request: the message nests objects and arrays deeper than %d levels, more than Berth reads; send params nested less deeply", maxNesting)
		}
		return nil, parseError(err)
	}
	if r := m.check(); r != nil {
		return nil, r
	}
	msg, err := jsonrpc2.DecodeMessage(body)
	if err != nil {
		// The checks above mirror the library's; a difference is a bug
		// in them, still answered rather than fatal.
		return nil, invalid(jsonrpc2.ID{}, "invalid request: the message is not one the JSON-RPC layer reads (%v); send one JSON-RPC 2.0 object per message", err)
	}
	return msg, nil
}

func parseError(err error) *refusal {
	return &refusal{reason: "parse", err: Errorf(CodeParseError, "parse error: the message is not valid JSON (%v); send one JSON-RPC 2.0 object per message", err)}
}

// syntaxError says why body is not one JSON value, or nil when it is.
func syntaxError(body []byte) error {
	dec := jsontext.NewDecoder(bytes.NewBuffer(body), jsonOptions)
	if _, err := dec.ReadValue(); err != nil {
		return err
	}
	return atEnd(dec)
}

// atEnd says what follows the value just read, if anything does: a
// decoder reads a stream of values, a message is one.
func atEnd(dec *jsontext.Decoder) error {
	switch _, err := dec.ReadToken(); err {
	case io.EOF:
		return nil
	case nil:
		return fmt.Errorf("more JSON after the first value, at byte %d", dec.InputOffset())
	default:
		return err
	}
}

// eachMember reads obj, which starts with '{', checking that it is one
// JSON object and nothing else, and calls f with each member's name as
// written (quotes and escapes included) and the span of its value.
func eachMember(obj []byte, f func(name, v []byte)) error {
	dec := jsontext.NewDecoder(bytes.NewBuffer(obj), jsonOptions)
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadValue()
		if err != nil {
			return err
		}
		// The decoder's values live until its next read: keep spans of
		// obj instead.
		end := dec.InputOffset()
		name = obj[end-int64(len(name)) : end]
		v, err := dec.ReadValue()
		if err != nil {
			return err
		}
		end = dec.InputOffset()
		f(name, obj[end-int64(len(v)):end])
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	return atEnd(dec)
}

// eachElement reads arr, one JSON array or null, and calls f with the
// span of each element.
func eachElement(arr []byte, f func(v []byte)) error {
	dec := jsontext.NewDecoder(bytes.NewBuffer(arr), jsonOptions)
	if t, err := dec.ReadToken(); err != nil || t.Kind() != '[' {
		return err
	}
	for dec.PeekKind() != ']' {
		v, err := dec.ReadValue()
		if err != nil {
			return err
		}
		end := dec.InputOffset()
		f(arr[end-int64(len(v)) : end])
	}
	_, err := dec.ReadToken()
	return err
}

// check refuses a message that is JSON but not JSON-RPC 2.0 as Berth
// reads it, in words that say what to send instead.
func (m *members) check() *refusal {
	if !m.hasMethod && m.hasError && (!m.hasID || isNull(m.id)) {
		// The peer could not read something sent to it, and cannot say
		// what: nothing to answer.
		return &refusal{drop: true, err: &Error{Message: clip(string(m.errobj))}}
	}
	var id jsonrpc2.ID
	if m.hasID {
		var r *refusal
		if id, r = checkID(m.id); r != nil {
			return r
		}
	}
	if string(m.jsonrpc) != `"2.0"` {
		return invalid(id, `invalid request: "jsonrpc" must be "2.0"`)
	}
	switch {
	case m.hasMethod && (m.hasResult || m.hasError):
		return invalid(id, `invalid request: a message has "method" (a request or notification) or "result" or "error" (a response), never both`)
	case m.hasMethod:
		if len(m.method) < 3 || m.method[0] != '"' {
			return invalid(id, `invalid request: "method" must be a non-empty string`)
		}
		if m.params != nil && !isNull(m.params) && m.params[0] != '{' && m.params[0] != '[' {
			return invalid(id, `invalid request: "params" must be an object (or an array), got %s`, kindOf(m.params))
		}
	case !m.hasID:
		return invalid(id, `invalid request: a message needs "method" (a request or notification) or "id" with "result" or "error" (a response)`)
	case m.hasResult == m.hasError:
		return invalid(id, `invalid response: exactly one of "result" and "error" must be present`)
	case m.hasError && !validErrorObject(m.errobj):
		return invalid(id, `invalid response: "error" must be an object {code, message} with an integer code and a string message`)
	}
	return nil
}

// checkID reads a request's or response's id as the library writes it
// back. An id that is not UTF-8 is refused rather than echoed: JSON text
// must be UTF-8 (RFC 8259), so the client could not match it anyway, and
// JSON-RPC answers with id null when the id cannot be read. A number must
// be an integer written in digits, within 64 bits: the library echoes no
// other (1.0 would come back as 1).
func checkID(raw []byte) (jsonrpc2.ID, *refusal) {
	null := jsonrpc2.ID{}
	switch {
	case !utf8.Valid(raw):
		return null, invalid(null, `invalid request: "id" is not valid UTF-8 (JSON text must be UTF-8); use an integer id or a UTF-8 string`)
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return null, invalid(null, `invalid request: "id" is not a valid JSON string (%v)`, err)
		}
		return jsonrpc2.NewStringID(s), nil
	case raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9':
		if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
			return jsonrpc2.NewNumberID(n), nil
		}
		return null, invalid(null, `invalid request: "id" must be a string or an integer (digits only, within 64 bits), got %s`, clip(string(raw)))
	}
	return null, invalid(null, `invalid request: "id" must be a string or an integer, got %s`, kindOf(raw))
}

// validErrorObject says an error member is one the library reads: an
// object whose code, when given, is an integer within 32 bits (as every
// JSON-RPC code is) and whose message, when given, is a string.
func validErrorObject(raw []byte) bool {
	if raw[0] != '{' {
		return false
	}
	ok := true
	_ = eachMember(raw, func(name, v []byte) {
		switch string(name) {
		case `"code"`:
			if _, err := strconv.ParseInt(string(v), 10, 32); err != nil {
				ok = false
			}
		case `"message"`:
			ok = ok && v[0] == '"'
		}
	})
	return ok
}

// maxNesting is how deep encoding/json and jsontext read objects and
// arrays.
const maxNesting = 10000

// deepID reads the top-level id of a message refused (err) only for
// nesting deeper than JSON readers go: a valid message gets its error
// under its own id. It walks the message token by token, which has no
// depth limit, and says ok only when the whole message is one valid JSON
// object with an id.
func deepID(err error, body []byte) ([]byte, bool) {
	if !strings.Contains(err.Error(), "exceeded max depth") {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	var id json.RawMessage
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, false
		}
		if key == "id" {
			if err := dec.Decode(&id); err != nil {
				return nil, false
			}
		} else if !skipValue(dec) {
			return nil, false
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return id, id != nil
}

// skipValue reads one value of any depth, token by token.
func skipValue(dec *json.Decoder) bool {
	depth := 0
	for {
		t, err := dec.Token()
		if err != nil {
			return false
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return true
		}
	}
}

func isNull(v []byte) bool { return string(v) == "null" }

func skipSpace(b []byte) int {
	return len(b) - len(bytes.TrimLeft(b, " \t\r\n"))
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
