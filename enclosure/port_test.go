package enclosure

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckPort: the edges of 1-65535 pass, and a port past either is an
// invalid configuration that names the port and the range.
func TestCheckPort(t *testing.T) {
	for _, p := range []int{1, 5678, 65535} {
		if err := CheckPort(p); err != nil {
			t.Errorf("CheckPort(%d) = %v, want nil", p, err)
		}
	}
	for _, p := range []int{-1, 0, 65536, 1 << 40} {
		err := CheckPort(p)
		if !errors.Is(err, ErrInvalidConfig) || err == nil || !strings.Contains(err.Error(), "1-65535") {
			t.Errorf("CheckPort(%d) = %v, want ErrInvalidConfig naming 1-65535", p, err)
		}
	}
}
