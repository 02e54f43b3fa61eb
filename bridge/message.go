package bridge

import "encoding/json"

// Version is the protocol version the driver announces in its ready frame;
// Berth refuses a driver that speaks another.
const Version = 1

// Frame types. Driver → Berth: Ready, Output, Display, Result, Error, Done,
// ToolCall. Berth → driver: Execute, ToolResult, Interrupt, Restarted.
const (
	TypeReady      = "ready"
	TypeExecute    = "execute"
	TypeOutput     = "output"
	TypeDisplay    = "display"
	TypeResult     = "result"
	TypeError      = "error"
	TypeDone       = "done"
	TypeToolCall   = "tool_call"
	TypeToolResult = "tool_result"
	TypeInterrupt  = "interrupt"
	// TypeRestarted is what a Berth that took a kernel back after a
	// restart sends it first: every tool() call still waiting for the
	// Berth before fails with Error, since no answer will come.
	TypeRestarted = "restarted"
	// TypeStray is never sent: the reader reports bytes outside any frame
	// with it, in Text.
	TypeStray = "stray"
)

// Done statuses.
const (
	StatusOK          = "ok"
	StatusError       = "error"
	StatusInterrupted = "interrupted"
)

// Frame is one message. Only the fields of its Type are set:
//
//	ready        Version, Language, Pid, Implementation
//	execute      Cell, Code
//	output       Cell, Stream ("stdout" or "stderr"), Text; a driver that
//	             captures fd 1 and 2 through one pipe, to keep their order
//	             as a terminal does with 2>&1, sends both as "stdout"
//	display      Cell, Data (a MIME bundle)
//	result       Cell, Data (the last expression's MIME bundle)
//	error        Cell, Name, Value, Traceback
//	done         Cell, Status; exactly once per cell, after its output
//	tool_call    Cell, ID, Name, Arguments
//	tool_result  ID, and Result (a tool result object) or Error
//	interrupt    Cell
//	restarted    Error: every pending tool() call fails with it
type Frame struct {
	Type           string                     `json:"type"`
	Version        int                        `json:"version,omitempty"`
	Language       string                     `json:"language,omitempty"`
	Pid            int                        `json:"pid,omitempty"`
	Implementation string                     `json:"implementation,omitempty"`
	Cell           string                     `json:"cell,omitempty"`
	Code           string                     `json:"code,omitempty"`
	Stream         string                     `json:"stream,omitempty"`
	Text           string                     `json:"text,omitempty"`
	Data           map[string]json.RawMessage `json:"data,omitempty"`
	Name           string                     `json:"name,omitempty"`
	Value          string                     `json:"value,omitempty"`
	Traceback      string                     `json:"traceback,omitempty"`
	Status         string                     `json:"status,omitempty"`
	ID             string                     `json:"id,omitempty"`
	Arguments      json.RawMessage            `json:"arguments,omitempty"`
	Result         json.RawMessage            `json:"result,omitempty"`
	Error          string                     `json:"error,omitempty"`
}
