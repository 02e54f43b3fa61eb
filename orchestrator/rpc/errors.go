package rpc

import (
	"encoding/json"
	"errors"
	"fmt"

	"go.lsp.dev/jsonrpc2"
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
