package bridge

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// ErrNoReady is returned when the stream ends before a ready frame.
var ErrNoReady = errors.New("bridge: process ended before it was ready")

// maxNoise bounds the text kept from before the ready frame: its tail is
// what explains a failed start.
const maxNoise = 64 << 10

// AwaitReady reads frames until the driver's ready frame and checks its
// protocol version. Text printed before it (an interpreter's warning, a
// crash message) is returned as noise, its last maxNoise bytes, and
// included in the error when the stream ends first.
func AwaitReady(r *Reader) (ready Frame, noise string, err error) {
	var buf []byte
	for {
		f, err := r.Read()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = ErrNoReady
			}
			return Frame{}, string(buf), fmt.Errorf("%w; it printed: %q", err, tail(string(buf), 2000))
		}
		switch f.Type {
		case TypeReady:
			if f.Version != Version {
				return f, string(buf), fmt.Errorf("bridge: driver speaks protocol version %d, Berth speaks %d", f.Version, Version)
			}
			return f, string(buf), nil
		case TypeStray:
			buf = append(buf, f.Text...)
		default:
			buf = fmt.Appendf(buf, "[unexpected %s frame before ready]\n", f.Type)
		}
		if over := len(buf) - maxNoise; over > 0 {
			buf = append(buf[:0], buf[over:]...)
		}
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + strings.ToValidUTF8(s[len(s)-n:], "")
}
