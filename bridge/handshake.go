package bridge

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// ErrNoReady is returned when the stream ends before a ready frame.
var ErrNoReady = errors.New("bridge: process ended before it was ready")

// AwaitReady reads frames until the driver's ready frame and checks its
// protocol version. Text printed before it (an interpreter's warning, a
// crash message) is returned as noise, and included in the error when
// the stream ends first.
func AwaitReady(r *Reader) (ready Frame, noise string, err error) {
	var sb strings.Builder
	for {
		f, err := r.Read()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = ErrNoReady
			}
			return Frame{}, sb.String(), fmt.Errorf("%w; it printed: %q", err, tail(sb.String(), 2000))
		}
		switch f.Type {
		case TypeReady:
			if f.Version != Version {
				return f, sb.String(), fmt.Errorf("bridge: driver speaks protocol version %d, Berth speaks %d", f.Version, Version)
			}
			return f, sb.String(), nil
		case TypeStray:
			sb.WriteString(f.Text)
		default:
			sb.WriteString(fmt.Sprintf("[unexpected %s frame before ready]\n", f.Type))
		}
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
