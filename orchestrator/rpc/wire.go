package rpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/berth-dev/berth/internal/jsonscan"
)

// ProtocolVersion is the protocol version initialize reports.
const ProtocolVersion = "1"

// Error codes. The first five are JSON-RPC 2.0's; RequestCancelled is
// LSP's; the -3200x codes are Berth's own.
const (
	CodeParseError     = -32700 // the message is not JSON
	CodeInvalidRequest = -32600 // JSON, but not a JSON-RPC request (or too large)
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602 // the message names the offending field
	CodeInternalError  = -32603
	// CodeRequestCancelled answers a request cancelled with $/cancelRequest.
	CodeRequestCancelled = -32800
	// CodeUnknownRun: the runId names no live run started on this
	// connection (it never existed, it ended, or another connection owns it).
	CodeUnknownRun = -32001
	// CodeRunEnded: the run ended while the request was being handled.
	CodeRunEnded = -32002
	// CodeUnavailable: a resource the request needs is not available.
	CodeUnavailable = -32003
)

// Error is a JSON-RPC error object. Its Error() is the message alone, so a
// harness's refusal reads as the harness wrote it.
type Error struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// Errorf builds an *Error.
func Errorf(code int64, format string, a ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, a...)}
}

// message is any JSON-RPC message on the wire. Which fields are present
// decides what it is: method and id a request, method alone a
// notification, id with result or error a response.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
	// unchecked says Result was taken out of the message without being
	// parsed (quickResponse): whoever reads it parses it, and when that
	// fails reads body, the whole message, with decode.
	unchecked bool
	body      []byte
}

// response is written for every request; Result is always present on
// success (JSON-RPC requires it) and id is null when the request's id
// could not be read.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

var nullID = json.RawMessage("null")

// decoded is what decode makes of one message body.
type decoded struct {
	msg message
	// hasID says the message carried an "id" member (requests and
	// responses); a notification has none.
	hasID bool
	// err, when set, is the reply to send (with id, or null) instead of
	// handling the message.
	err *Error
}

// decode checks a body against JSON-RPC 2.0 and says what is wrong with it
// in words a harness author can act on.
func decode(body []byte) decoded {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		if id, ok := deepID(err, body); ok {
			d := decoded{hasID: true, msg: message{ID: id}}
			if msg := checkID(id); msg != "" {
				d.msg.ID = nullID
				return d.withErr(Errorf(CodeInvalidRequest, "invalid request: %s", msg))
			}
			return d.withErr(Errorf(CodeInvalidRequest, "invalid request: the message nests objects and arrays deeper than %d levels, more than Berth reads; send params nested less deeply", maxNesting))
		}
		if !json.Valid(body) {
			return decoded{err: Errorf(CodeParseError, "parse error: the message is not valid JSON (%v); send one JSON-RPC 2.0 object per message", err)}
		}
		return decoded{err: Errorf(CodeInvalidRequest, "invalid request: the message must be a JSON object (batches are not supported); got %s", kindOf(body))}
	}
	var d decoded
	if id, ok := raw["id"]; ok {
		d.hasID = true
		d.msg.ID = id
		if msg := checkID(id); msg != "" {
			d.msg.ID = nullID
			return d.withErr(Errorf(CodeInvalidRequest, "invalid request: %s", msg))
		}
	}
	if v, ok := raw["jsonrpc"]; !ok || string(v) != `"2.0"` {
		return d.withErr(Errorf(CodeInvalidRequest, "invalid request: \"jsonrpc\" must be \"2.0\""))
	}
	if m, ok := raw["method"]; ok {
		if err := json.Unmarshal(m, &d.msg.Method); err != nil || d.msg.Method == "" {
			return d.withErr(Errorf(CodeInvalidRequest, "invalid request: \"method\" must be a non-empty string"))
		}
		if p, ok := raw["params"]; ok && string(p) != "null" {
			if k := kindOf(p); k != "object" && k != "array" {
				return d.withErr(Errorf(CodeInvalidRequest, "invalid request: \"params\" must be an object, got %s", k))
			}
			d.msg.Params = p
		}
		return d
	}
	// A response to one of our calls.
	if !d.hasID {
		return d.withErr(Errorf(CodeInvalidRequest, "invalid request: a message needs \"method\" (a request or notification) or \"id\" with \"result\" or \"error\" (a response)"))
	}
	res, hasRes := raw["result"]
	e, hasErr := raw["error"]
	if hasRes == hasErr {
		return d.withErr(Errorf(CodeInvalidRequest, "invalid response: exactly one of \"result\" and \"error\" must be present"))
	}
	d.msg.Result = res
	if hasErr {
		if err := json.Unmarshal(e, &d.msg.Error); err != nil || d.msg.Error == nil {
			return d.withErr(Errorf(CodeInvalidRequest, "invalid response: \"error\" must be an object {code, message}"))
		}
	}
	return d
}

// quickResponse reads a success response in the shape resultBytes writes,
// {"jsonrpc":"2.0","id":<integer>,"result":<value>}, without parsing the
// result: the Call waiting for it parses it once, into its own type,
// instead of after a first pass here. Any other message says !ok and goes
// through decode.
func quickResponse(body []byte) (d decoded, ok bool) {
	const head, mid = `{"jsonrpc":"2.0","id":`, `,"result":`
	rest, found := bytes.CutPrefix(body, []byte(head))
	if !found {
		return d, false
	}
	n := 0
	if n < len(rest) && rest[n] == '-' {
		n++
	}
	digits := n
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	if n == digits || n-digits > 15 { // no digits, or beyond float64's exact integers
		return d, false
	}
	id := rest[:n]
	result, found := bytes.CutPrefix(rest[n:], []byte(mid))
	if !found || len(result) < 2 || result[len(result)-1] != '}' {
		return d, false
	}
	d.hasID = true
	d.msg = message{JSONRPC: "2.0", ID: json.RawMessage(id), Result: json.RawMessage(result[:len(result)-1]), unchecked: true, body: body}
	return d, true
}

// quickRequest reads a request or notification, {"jsonrpc":"2.0","id":..,
// "method":..,"params":..} in any order and spacing, with one strict pass
// (jsonscan) instead of decoding it into a map of raw values. Anything it
// does not take on (another member, params that are not an object or an
// array, a response, invalid JSON) says !ok and goes through decode, which
// decides and words the error; a message read here is read as decode
// reads it.
func quickRequest(body []byte) (d decoded, ok bool) {
	p := jsonscan.New(body)
	version := false
	ok = p.Object(func(key string) bool {
		switch key {
		case "jsonrpc":
			v, ok := p.Raw()
			version = ok && string(v) == `"2.0"`
			return version
		case "id":
			id, ok := p.Raw()
			d.hasID, d.msg.ID = true, json.RawMessage(id)
			return ok && validID(id)
		case "method":
			var ok bool
			d.msg.Method, ok = p.String()
			return ok
		case "params":
			params, ok := p.Raw()
			d.msg.Params = json.RawMessage(params)
			return ok && (params[0] == '{' || params[0] == '[')
		}
		return false
	})
	if !ok || !p.End() || !version || d.msg.Method == "" {
		return decoded{}, false
	}
	return d, true
}

// maxNesting is how deep encoding/json reads objects and arrays.
const maxNesting = 10000

// deepID reads the top-level id of a message encoding/json refused (err)
// only for nesting deeper than it reads: a valid message gets its error
// under its own id. It walks the message token by token, which has no
// depth limit, and says ok only when the whole message is one valid JSON
// object with an id.
func deepID(err error, body []byte) (json.RawMessage, bool) {
	var se *json.SyntaxError
	if !errors.As(err, &se) || !strings.Contains(se.Error(), "exceeded max depth") {
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

func (d decoded) withErr(e *Error) decoded {
	d.err = e
	return d
}

// isResponse says the message is a valid response to one of our calls.
func (d decoded) isResponse() bool { return d.err == nil && d.msg.Method == "" }

// checkID says what is wrong with a request's id, or "" when nothing is.
// An id that is not UTF-8 is refused rather than echoed: JSON text must be
// UTF-8 (RFC 8259), so it could not be matched by the client anyway, and
// JSON-RPC answers with id null when the id cannot be read.
func checkID(id json.RawMessage) string {
	switch {
	case !utf8.Valid(id):
		return "\"id\" is not valid UTF-8 (JSON text must be UTF-8); use an integer id or a UTF-8 string"
	case !validID(id):
		return fmt.Sprintf("\"id\" must be a string or an integer, got %s", kindOf(id))
	}
	return ""
}

func validID(id json.RawMessage) bool {
	if _, ok := plainInt(id); ok {
		return true
	}
	if !utf8.Valid(id) {
		return false
	}
	var v any
	if json.Unmarshal(id, &v) != nil {
		return false
	}
	switch n := v.(type) {
	case string:
		return true
	case float64:
		return n == float64(int64(n))
	}
	return false
}

// plainInt says an id is a plain non-negative integer as JSON writes it
// (no sign, exponent, fraction or leading zero, at most 15 digits: exact
// in a float64) and returns it; the usual id, read without a parse.
func plainInt(id json.RawMessage) (string, bool) {
	if len(id) == 0 || len(id) > 15 || (id[0] == '0' && len(id) > 1) {
		return "", false
	}
	for _, c := range id {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return string(id), true
}

// kindOf names the JSON type of a value for error messages.
//
// It looks at the first byte only: callers pass JSON that was already
// parsed (a whole message, or a value taken out of one), so parsing it
// again into an interface just to name its kind would cost a full pass.
func kindOf(b []byte) string {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return "invalid JSON"
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

// idKey normalises an id for map lookups (1 and 1.0 are the same id).
func idKey(id json.RawMessage) string {
	if n, ok := plainInt(id); ok {
		return "n" + n
	}
	var v any
	if json.Unmarshal(id, &v) != nil {
		return string(id)
	}
	if f, ok := v.(float64); ok {
		return fmt.Sprintf("n%d", int64(f))
	}
	if s, ok := v.(string); ok {
		return "s" + s
	}
	return string(id)
}
