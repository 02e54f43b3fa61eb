package orchestrator

import "fmt"

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
}

// Text is a successful result of one text block.
func Text(s string) *Result { return &Result{Content: []Block{{Type: "text", Text: s}}} }

// Textf is Text with formatting.
func Textf(format string, a ...any) *Result { return Text(fmt.Sprintf(format, a...)) }

// Errorf is an error result: one text block that says what was wrong and
// what to do instead.
func Errorf(format string, a ...any) *Result {
	return &Result{Content: []Block{{Type: "text", Text: fmt.Sprintf(format, a...)}}, IsError: true}
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
