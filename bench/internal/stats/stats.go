// Package stats holds the order statistics the benchmarks report.
package stats

import (
	"fmt"
	"slices"
	"time"
)

// Median is the middle of d (the upper middle for an even count).
func Median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// Percentile is the p-th percentile of d (nearest rank).
func Percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

// MS prints d in milliseconds with two decimals.
func MS(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
