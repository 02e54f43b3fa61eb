package orchestrator

import (
	"context"
	"encoding/json"
	"time"
)

// Harness is the connection that owns a run, seen from the tools. The
// protocol package implements it; tool packages reach the harness only
// through it.
type Harness interface {
	// CallTool re-enters the harness's tool registry (tool() from a cell).
	// The harness applies its own restrictions and approvals; a refusal is
	// an error result or a Go error, as the harness answers. The result is
	// the harness's JSON as it came, a tool result {content, isError}
	// (checked to be one), for the caller to pass on without decoding it.
	CallTool(ctx context.Context, call ToolCall) (json.RawMessage, error)
	// Ask renders a question card and blocks until it is answered, skipped
	// or ctx ends (which cancels the card at the harness). An error means
	// no human can answer (none connected) or the connection broke.
	Ask(ctx context.Context, q Question) (*Answer, error)
}

// ToolCall is a tool() re-entry request.
type ToolCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Origin    Origin          `json:"origin"`
}

// Origin says which tool and cell made a re-entrant call.
type Origin struct {
	Tool string `json:"tool"`
	Cell string `json:"cell,omitempty"`
}

// Question is a card for the human.
type Question struct {
	Number        int           `json:"number"`
	Question      string        `json:"question"`
	Context       string        `json:"context,omitempty"`
	Options       []Option      `json:"options,omitempty"`
	AllowFreeText bool          `json:"allowFreeText"`
	MultiSelect   bool          `json:"multiSelect"`
	Timeout       time.Duration `json:"-"`
}

// Option is one choice on a card.
type Option struct {
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
}

// Answer is the human's reply: Outcome is "answered" or "skipped".
type Answer struct {
	Outcome  string   `json:"outcome"`
	Selected []string `json:"selected,omitempty"`
	Text     string   `json:"text,omitempty"`
}

// WriteObserver is told about the harness's own file writes
// (files/willWrite, files/didWrite) and reports the diagnostics they
// introduced. The lsp package implements it.
type WriteObserver interface {
	WillWrite(ctx context.Context, run *Run, paths []string) error
	DidWrite(ctx context.Context, run *Run, paths []string) (*WriteReport, error)
}

// Write states: silence is never clean.
const (
	WriteClean   = "clean"
	WriteIssues  = "issues"
	WriteUnknown = "unknown"
)

// WriteReport is the answer to files/didWrite: only new diagnostics.
type WriteReport struct {
	Diagnostics []Diagnostic `json:"diagnostics"`
	Text        string       `json:"text"`
	State       string       `json:"state"`
}

// Diagnostic is one problem reported by a language server, with its path
// relative to the run's working directory and 1-based line and column.
type Diagnostic struct {
	Path     string `json:"path"`
	Line     int    `json:"line"`
	Col      int    `json:"col"`
	Severity string `json:"severity"` // error, warning, information, hint
	Code     string `json:"code,omitempty"`
	Source   string `json:"source,omitempty"`
	Message  string `json:"message"`
}
