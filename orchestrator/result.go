package orchestrator

import (
	"fmt"
	"slices"

	"github.com/berth-dev/berth/internal/errclass"
)

// Block is one content block of a result. Type is "text", "image" or
// "table"; only the fields of that type are set.
type Block struct {
	Type string `json:"type"`
	// text
	Text string `json:"text,omitempty"`
	// image: base64 data and its MIME type (image/png)
	Data     string `json:"data,omitempty"`
	MimeType string `json:"mimeType,omitempty"`
	// table
	Columns   []string   `json:"columns,omitempty"`
	Rows      [][]string `json:"rows,omitempty"`
	Truncated bool       `json:"truncated,omitempty"`
}

// Result is what a tool call returns: content blocks and whether the call
// failed in a way the model can act on.
type Result struct {
	Content []Block `json:"content"`
	IsError bool    `json:"isError"`
	// ErrorClass is an error result's class (internal/errclass: gone,
	// unavailable, not_found, invalid, ...), so that a harness can tell
	// a stopped container from a bad argument without reading the text.
	// It is absent when the failure has no class: the work itself
	// failed (a cell raised, an edit does not parse) or Berth did.
	ErrorClass errclass.Class `json:"errorClass,omitempty"`
}

// Text is a successful result of one text block.
func Text(s string) *Result { return &Result{Content: []Block{{Type: "text", Text: s}}} }

// Textf is Text with formatting.
func Textf(format string, a ...any) *Result { return Text(fmt.Sprintf(format, a...)) }

// Errorf is an error result: one text block that says what was wrong and
// what to do instead. Its class is that of the first error among a that
// has one (a driver's gone container said with %v keeps its class); set
// another with Classed. An error of a class is said without the class
// words its %w chain appended (": gone"): errorClass says them.
func Errorf(format string, a ...any) *Result {
	r := &Result{IsError: true}
	if len(a) > 0 {
		a = slices.Clone(a)
	}
	for i, v := range a {
		if err, ok := v.(error); ok {
			if c := errclass.Of(err); c != "" {
				if r.ErrorClass == "" {
					r.ErrorClass = c
				}
				a[i] = errclass.Say(err)
			}
		}
	}
	r.Content = []Block{{Type: "text", Text: fmt.Sprintf(format, a...)}}
	return r
}

// Classed sets an error result's class to class's (a sentinel of
// internal/errclass, or an error wrapping one) and returns it.
func (r *Result) Classed(class error) *Result {
	r.ErrorClass = errclass.Of(class)
	return r
}

// Failed is the error result of a tool's error: its message without the
// class words, and its class.
func Failed(err error) *Result {
	r := Errorf("%s", errclass.Say(err))
	r.ErrorClass = errclass.Of(err)
	return r
}

// TextBlock, ImageBlock and TableBlock build blocks.
func TextBlock(s string) Block { return Block{Type: "text", Text: s} }

// ImageBlock holds base64-encoded image data.
func ImageBlock(mime, base64Data string) Block {
	return Block{Type: "image", MimeType: mime, Data: base64Data}
}

// TableBlock holds a table; truncated says rows were cut.
func TableBlock(columns []string, rows [][]string, truncated bool) Block {
	return Block{Type: "table", Columns: columns, Rows: rows, Truncated: truncated}
}

// FirstText returns the text of the first text block, or "".
func (r *Result) FirstText() string {
	for _, b := range r.Content {
		if b.Type == "text" {
			return b.Text
		}
	}
	return ""
}
