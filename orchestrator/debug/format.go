package debug

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/google/go-dap"

	"github.com/berth-dev/berth/internal/text"
)

// Caps from the spec.
const (
	maxFrames   = 30
	maxChildren = 50
	maxValue    = 400 // characters
)

// cutValue caps a value at maxValue characters, on a UTF-8 boundary, and
// says so when it cut. A value is the adapter's or the program's text:
// its control characters other than newlines and tabs are escaped
// (text.Message), so that it cannot rewrite what the answer shows.
func cutValue(v string) string {
	v = text.Message(v)
	n := utf8.RuneCountInString(v)
	if n <= maxValue {
		return v
	}
	i, k := 0, 0
	for i = range v {
		if k == maxValue {
			break
		}
		k++
	}
	return fmt.Sprintf("%s… (cut: showing %d of %d characters)", v[:i], maxValue, n)
}

var errNotRegular = errors.New("not a regular file")

// openRegular opens a regular file for reading, and refuses anything else
// without blocking: opening a FIFO for reading waits for a writer, so the
// open does not wait (O_NONBLOCK) and the opened file is checked (fstat,
// not a stat before the open, which a swap could outrun).
func openRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, errNotRegular
	}
	return f, nil
}

// countLines is the number of lines of a regular file; a last line
// without a newline counts.
func countLines(path string) (int, error) {
	f, err := openRegular(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	n, last := 0, byte('\n')
	buf := make([]byte, 32<<10)
	for {
		k, err := r.Read(buf)
		if k > 0 {
			n += bytes.Count(buf[:k], []byte{'\n'})
			last = buf[k-1]
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	if last != '\n' {
		n++
	}
	return n, nil
}

func sorted(xs []string) []string {
	sort.Strings(xs)
	return xs
}

func sourcePath(src *dap.Source) string {
	if src == nil {
		return ""
	}
	return src.Path
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// joinDistinct joins the stop's text and description (an exception's
// type and message), dropping empty and repeated parts.
func joinDistinct(a, b string) string {
	switch {
	case a == "" || a == b:
		return b
	case b == "":
		return a
	}
	return a + ": " + b
}

func errString(err error) string {
	if err == nil {
		return "no reason given"
	}
	return err.Error()
}

func baseName(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}
