package stats

import (
	"testing"
	"time"
)

func TestOrderStatistics(t *testing.T) {
	d := []time.Duration{5, 1, 4, 2, 3}
	if got := Median(d); got != 3 {
		t.Errorf("Median = %v, want 3", got)
	}
	if got := Median([]time.Duration{4, 1, 3, 2}); got != 3 {
		t.Errorf("Median of an even count = %v, want the upper middle, 3", got)
	}
	if d[0] != 5 {
		t.Error("Median sorted its argument in place")
	}
	for _, c := range []struct {
		p    int
		want time.Duration
	}{{0, 1}, {20, 1}, {50, 3}, {90, 5}, {100, 5}} {
		if got := Percentile(d, c.p); got != c.want {
			t.Errorf("Percentile(%d) = %v, want %v", c.p, got, c.want)
		}
	}
	if got := MS(1500 * time.Microsecond); got != "1.50 ms" {
		t.Errorf("MS = %q, want 1.50 ms", got)
	}
}
