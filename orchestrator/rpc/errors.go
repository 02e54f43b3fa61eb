package rpc

import (
	"encoding/json"
	"errors"
	"fmt"

	"go.lsp.dev/jsonrpc2"

	"github.com/berth-dev/berth/internal/errclass"
)

// ProtocolVersion is the protocol version initialize reports.
const ProtocolVersion = "1"

// Error codes. The first five are JSON-RPC 2.0's; RequestCancelled is
// LSP's; the -3200x codes are Berth's own, one per error class
// (internal/errclass; the table is classCodes).
const (
	CodeParseError     = -32700 // the message is not JSON
	CodeInvalidRequest = -32600 // JSON, but not a JSON-RPC request (or too large)
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602 // class invalid: the message names the offending field
	CodeInternalError  = -32603 // no class: Berth's own fault
	// CodeRequestCancelled answers a request cancelled with
	// $/cancelRequest (class canceled).
	CodeRequestCancelled = -32800
	// CodeNotFound (class not_found): what the request names does not
	// exist; for a runId, no live run started on this connection (it
	// never existed, it ended, or another connection owns it).
	CodeNotFound = -32001
	// CodeGone (class gone): it existed and no longer serves: the run
	// ended while the request was handled, or run/start's container is
	// stopped or removed.
	CodeGone = -32002
	// CodeUnavailable (class unavailable): a resource the request needs
	// cannot serve now (an engine that does not answer, a paused
	// container); the same call can succeed later.
	CodeUnavailable = -32003
	// CodeConflict (class conflict): the request clashes with the state
	// (a runId in use).
	CodeConflict = -32004
	// CodePermission (class permission): the caller may not do this.
	CodePermission = -32005
	// CodeTimeout (class timeout): the request's deadline passed.
	CodeTimeout = -32006
	// CodeRestarting (class restarting): Berth is restarting.
	CodeRestarting = -32007
	// CodeOutcomeUnknown (class outcome_unknown): the request may or may
	// not have taken effect.
	CodeOutcomeUnknown = -32008

	// CodeUnknownRun is CodeNotFound, as a runId meets it.
	CodeUnknownRun = CodeNotFound
	// CodeRunEnded is CodeGone, as a run meets it.
	CodeRunEnded = CodeGone
)

// classCodes is the one mapping of the error classes to the wire: each
// class's JSON-RPC code and the next step a harness (or the model) can
// take. docs/protocol.md's table is this one
// (TestProtocolDocListsTheMapping holds them together).
var classCodes = []struct {
	class  errclass.Class
	code   int64
	advice string
}{
	{errclass.Invalid, CodeInvalidParams, "fix what the message names and send the request again"},
	{errclass.NotFound, CodeNotFound, "name something that exists (a run this connection started with run/start, an installed executable, a path inside the workdir)"},
	{errclass.Gone, CodeGone, "it will not come back: start a new run, in a running container"},
	{errclass.Unavailable, CodeUnavailable, "nothing is wrong with the request: make the resource available (start the engine, unpause the container) and send it again"},
	{errclass.Conflict, CodeConflict, "the request clashes with what exists: end or rename the other, then send it again"},
	{errclass.Permission, CodePermission, "this caller may not do this: ask one that may, or grant the permission the message names"},
	{errclass.Timeout, CodeTimeout, "it did not finish in time: ask for less, or raise the timeout the message names, then send it again"},
	{errclass.Canceled, CodeRequestCancelled, "it was cancelled: send it again if it is still wanted"},
	{errclass.Restarting, CodeRestarting, "Berth is restarting: send it again once it answers"},
	{errclass.OutcomeUnknown, CodeOutcomeUnknown, "it may or may not have taken effect: look before you send it again"},
}

// internalAdvice is the next step for an error of no class.
const internalAdvice = "Berth failed on its own account: send the request again, and report this if it repeats"

// ErrorData is an error's data as Berth sends it: its class and the next
// step that class takes.
type ErrorData struct {
	Class  errclass.Class `json:"class"`
	Advice string         `json:"advice"`
}

// Advice is the next step for an error of class c ("" for no class: an
// internal error's).
func Advice(c errclass.Class) string {
	for _, e := range classCodes {
		if e.class == c {
			return e.advice
		}
	}
	return internalAdvice
}

// codeOf is class c's code; CodeInternalError for no class.
func codeOf(c errclass.Class) int64 {
	for _, e := range classCodes {
		if e.class == c {
			return e.code
		}
	}
	return CodeInternalError
}

// ClassOf is the class a JSON-RPC error of Berth's carries in its data
// ("" for none).
func (e *Error) ClassOf() errclass.Class {
	var d ErrorData
	if len(e.Data) == 0 || json.Unmarshal(e.Data, &d) != nil {
		return ""
	}
	return d.Class
}

// toError is the one mapping of the core's errors to the wire: an
// *Error passes as it is; any other error gets its class's code (internal
// error for none), its class and advice as data, and as message the
// core's own sentence, which names what failed and what to do, without
// the class words the core appends with %w (the code already says them).
// A bare class, with no sentence of its own, is said with its advice.
func toError(err error) error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	class := errclass.Of(err)
	msg := errclass.Say(err)
	switch {
	case class == "":
		msg = "internal error: " + msg
	case errclass.Bare(err):
		// Nothing but the class: say what to do.
		msg += ": " + Advice(class)
	}
	data, _ := json.Marshal(ErrorData{Class: class, Advice: Advice(class)})
	return &Error{Code: codeOf(class), Message: msg, Data: data}
}

// failf is an error of class (a sentinel of internal/errclass) with
// Berth's own sentence, through the one mapping (toError): the protocol's
// own refusals (bad params, a cancelled request) carry their class and
// advice as the core's errors do.
func failf(class error, format string, a ...any) *Error {
	return toError(fmt.Errorf(format+": %w", append(a, class)...)).(*Error)
}

// ErrClosed is returned by calls on a connection that has closed.
var ErrClosed = errors.New("connection closed")

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

// toWire is e as the library writes it. Codes are 32-bit on the wire
// (the library reads no other), as every code JSON-RPC defines is.
func (e *Error) toWire() *jsonrpc2.Error {
	return &jsonrpc2.Error{Code: jsonrpc2.Code(e.Code), Message: e.Message, Data: jsonrpc2.RawMessage(e.Data)}
}

// fromWire is an error object the peer sent, as callers of this package
// see it.
func fromWire(e *jsonrpc2.Error) *Error {
	return &Error{Code: int64(e.Code), Message: e.Message, Data: json.RawMessage(e.Data)}
}
