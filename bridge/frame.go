package bridge

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// sep starts every frame; a newline ends it. JSON encodes control bytes
// inside strings, so neither can appear within a frame's object.
const sep = 0x1E

// MaxFrame bounds one frame (a large image is the biggest thing sent).
const MaxFrame = 64 << 20

// ErrFrameTooLarge is returned for a line longer than MaxFrame.
var ErrFrameTooLarge = errors.New("bridge: frame larger than MaxFrame")

// Writer writes frames; it is safe for concurrent use and writes each
// frame with one call to the underlying writer.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write encodes and writes one frame.
func (w *Writer) Write(f Frame) error {
	b, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("bridge: encode %s frame: %w", f.Type, err)
	}
	buf := make([]byte, 0, len(b)+2)
	buf = append(buf, sep)
	buf = append(buf, b...)
	buf = append(buf, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err = w.w.Write(buf)
	return err
}

// Reader reads frames. It is not safe for concurrent use.
type Reader struct {
	r       *bufio.Reader
	pending []Frame
}

// NewReader returns a Reader on r.
func NewReader(r io.Reader) *Reader { return &Reader{r: bufio.NewReaderSize(r, 64<<10)} }

// Read returns the next frame. Bytes outside a frame come back as a
// TypeStray frame holding them; a line that starts like a frame but is not
// valid JSON is stray too, so nothing a process prints is lost or taken
// for a message.
//
// A frame starts at the last separator of its line: its JSON cannot hold
// one, so an earlier separator belongs to bytes that are not a frame (a
// frame cut short when its writer was stopped, a stray write), and the
// frame that follows them on the line is still read.
func (r *Reader) Read() (Frame, error) {
	if len(r.pending) > 0 {
		f := r.pending[0]
		r.pending = r.pending[1:]
		return f, nil
	}
	line, err := r.line()
	if len(line) == 0 {
		return Frame{}, err
	}
	i := bytes.LastIndexByte(line, sep)
	if i < 0 {
		return Frame{Type: TypeStray, Text: string(line)}, nil
	}
	var out []Frame
	if i > 0 {
		out = append(out, Frame{Type: TypeStray, Text: string(line[:i])})
	}
	body := bytes.TrimSuffix(line[i+1:], []byte("\n"))
	var f Frame
	if jerr := json.Unmarshal(body, &f); jerr != nil || f.Type == "" {
		out = append(out, Frame{Type: TypeStray, Text: string(line[i:])})
	} else {
		out = append(out, f)
	}
	r.pending = out[1:]
	return out[0], nil
}

// line reads through the next newline (or to EOF), at most MaxFrame bytes.
// A long run of bytes with no separator in it cannot become a frame, so it
// comes back in pieces of the buffer's size rather than counting against
// MaxFrame: a process may print without newlines for ever.
//
// A frame's line is kept in pieces and joined once it is whole: growing
// one buffer by appending costs some five times the line in allocations
// and twice it at once, which a frame that never ends (a cell writing to
// the protocol's descriptor) would make Berth pay for MaxFrame (issue 24
// item 1).
func (r *Reader) line() ([]byte, error) {
	var parts [][]byte
	size := 0
	for {
		chunk, err := r.r.ReadSlice('\n')
		if size += len(chunk); size > MaxFrame {
			return nil, ErrFrameTooLarge
		}
		parts = append(parts, bytes.Clone(chunk))
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(parts) > 1 || bytes.IndexByte(chunk, sep) >= 0 {
				continue
			}
			err = nil
		}
		if len(parts) == 1 {
			return parts[0], err
		}
		return bytes.Join(parts, nil), err
	}
}
