package kernel

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/berth-dev/berth/bridge"
	"github.com/berth-dev/berth/orchestrator"
)

// tableMIME is the driver's table of a pandas DataFrame or Series.
const tableMIME = "application/vnd.berth.table+json"

// output gathers what a cell sends back and turns it into a result:
// printed output first (stdout and stderr as they interleaved, capped
// head and tail), then displays and the last value in order, then the
// error.
type output struct {
	cfg    Config
	text   *capText
	blocks []orchestrator.Block
	images int
	errTxt string
	failed bool
}

func newOutput(cfg Config) *output { return &output{cfg: cfg, text: newCapText(cfg.OutputLimit)} }

// add takes one frame of the cell: printed text, a bundle, or its error.
func (o *output) add(f bridge.Frame, cell string) {
	switch f.Type {
	case bridge.TypeOutput, bridge.TypeStray:
		o.text.write(f.Text)
	case bridge.TypeDisplay, bridge.TypeResult:
		o.addBundle(f.Data)
	case bridge.TypeError:
		if f.Cell != cell {
			return
		}
		o.failed = true
		o.errTxt = capString(f.Traceback, o.cfg.OutputLimit)
		if o.errTxt == "" {
			o.errTxt = f.Name + ": " + f.Value
		}
	}
}

// addInherited keeps the error or the value of the cell a resumed
// kernel ran when Berth went away, said to be that cell's.
func (o *output) addInherited(f bridge.Frame) {
	if f.Type == bridge.TypeResult {
		o.blocks = append(o.blocks, orchestrator.TextBlock("The cell that was running when Berth restarted returned:"))
		o.addBundle(f.Data)
		return
	}
	tb := f.Traceback
	if tb == "" {
		tb = f.Name + ": " + f.Value
	}
	o.blocks = append(o.blocks, orchestrator.TextBlock("The cell that was running when Berth restarted ended with an error:\n"+capString(tb, o.cfg.OutputLimit)))
}

// addBundle turns a MIME bundle into one block: a table, an image, or the
// most telling text form.
func (o *output) addBundle(data map[string]json.RawMessage) {
	if raw, ok := data[tableMIME]; ok {
		var t struct {
			Columns   []string   `json:"columns"`
			Rows      [][]string `json:"rows"`
			Truncated bool       `json:"truncated"`
		}
		if json.Unmarshal(raw, &t) == nil && len(t.Columns) > 0 {
			b := orchestrator.TableBlock(t.Columns, t.Rows, t.Truncated)
			b.Text = capString(textOf(data["text/plain"]), o.cfg.OutputLimit)
			o.blocks = append(o.blocks, b)
			return
		}
	}
	for _, mime := range []string{"image/png", "image/jpeg"} {
		if raw, ok := data[mime]; ok {
			o.addImage(mime, textOf(raw))
			return
		}
	}
	for _, mime := range []string{"text/markdown", "application/json", "text/plain", "text/html", "image/svg+xml", "text/latex"} {
		raw, ok := data[mime]
		if !ok {
			continue
		}
		s := textOf(raw)
		if mime == "application/json" {
			var buf bytes.Buffer
			if json.Indent(&buf, raw, "", "  ") == nil {
				s = buf.String()
			}
		}
		o.blocks = append(o.blocks, orchestrator.TextBlock(capString(s, o.cfg.OutputLimit)))
		return
	}
}

// addImage keeps an image within the caps; an image over them becomes a
// note, never its data as text.
func (o *output) addImage(mime, b64 string) {
	size := base64.StdEncoding.DecodedLen(len(b64))
	switch {
	case o.images >= o.cfg.MaxImages:
		o.blocks = append(o.blocks, orchestrator.TextBlock(fmt.Sprintf(
			"[%s not shown: this cell already returned %d images, the cap; save further images to files]", mime, o.cfg.MaxImages)))
	case size > o.cfg.ImageLimit:
		o.blocks = append(o.blocks, orchestrator.TextBlock(fmt.Sprintf(
			"[%s of %s not shown: over the %s cap per image; make it smaller or save it to a file]", mime, humanBytes(size), humanBytes(o.cfg.ImageLimit))))
	default:
		o.images++
		o.blocks = append(o.blocks, orchestrator.ImageBlock(mime, b64))
	}
}

// result assembles the blocks, with notes (an interrupt, a death) last.
func (o *output) result(notes ...string) *orchestrator.Result {
	res := &orchestrator.Result{IsError: o.failed}
	if s := o.text.String(); s != "" {
		res.Content = append(res.Content, orchestrator.TextBlock(s))
	}
	res.Content = append(res.Content, o.blocks...)
	if o.errTxt != "" {
		res.Content = append(res.Content, orchestrator.TextBlock(o.errTxt))
	}
	for _, n := range notes {
		if n != "" {
			res.Content = append(res.Content, orchestrator.TextBlock(n))
		}
	}
	if len(res.Content) == 0 {
		res.Content = []orchestrator.Block{orchestrator.TextBlock("(no output)")}
	}
	return res
}

// textOf reads a JSON string, or gives the raw JSON for anything else.
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// capText keeps the first and last limit/2 bytes written and counts what
// fell between them, so a flood of output costs bounded memory.
type capText struct {
	limit int
	head  []byte
	tail  []byte
	cut   int
}

func newCapText(limit int) *capText { return &capText{limit: limit} }

func (c *capText) write(s string) {
	half := c.limit / 2
	if room := half - len(c.head); room > 0 {
		n := min(room, len(s))
		c.head = append(c.head, s[:n]...)
		s = s[n:]
	}
	c.tail = append(c.tail, s...)
	if over := len(c.tail) - (c.limit - half); over > 0 {
		c.cut += over
		c.tail = append(c.tail[:0], c.tail[over:]...)
	}
}

func (c *capText) String() string {
	if c.cut == 0 {
		return strings.ToValidUTF8(string(c.head)+string(c.tail), "\uFFFD")
	}
	// A rune cut at either edge is dropped rather than shown broken.
	head, tail := strings.ToValidUTF8(string(c.head), ""), strings.ToValidUTF8(string(c.tail), "")
	return fmt.Sprintf("%s\n… [%s of output cut here; showing the first %s and the last %s] …\n%s",
		head, humanBytes(c.cut), humanBytes(len(head)), humanBytes(len(tail)), tail)
}

// capString caps one text the same way, head and tail.
func capString(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	c := newCapText(limit)
	c.write(s)
	return c.String()
}

func humanBytes(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 10<<10:
		return fmt.Sprintf("%d KB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
