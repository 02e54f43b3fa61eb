package structural

import (
	"bytes"
	"fmt"
	"strings"
)

// edit replaces [start, end) of a file's source with text.
type edit struct {
	start, end uint32
	text       string
}

// applyEdits returns src with the edits (sorted, not overlapping) made.
func applyEdits(src []byte, edits []edit) []byte {
	var out bytes.Buffer
	prev := uint32(0)
	for _, e := range edits {
		out.Write(src[prev:e.start])
		out.WriteString(e.text)
		prev = e.end
	}
	out.Write(src[prev:])
	return out.Bytes()
}

const diffContext = 3

// unifiedDiff renders the edits of one file as a unified diff with three
// lines of context. The edits are known, so the hunks come from them
// directly rather than from a line comparison.
func unifiedDiff(rel string, src []byte, edits []edit) []string {
	lines := splitLines(src)
	starts := make([]uint32, len(lines)+1) // byte offset of each line
	off := uint32(0)
	for i, l := range lines {
		starts[i] = off
		off += uint32(len(l))
	}
	starts[len(lines)] = off
	lineOf := func(b uint32) int {
		lo, hi := 0, len(lines)
		for lo < hi {
			m := (lo + hi) / 2
			if starts[m+1] <= b {
				lo = m + 1
			} else {
				hi = m
			}
		}
		return min(lo, max(len(lines)-1, 0))
	}

	// Group edits that touch the same or adjacent lines.
	type group struct {
		first, last int // old lines
		edits       []edit
	}
	var groups []group
	for _, e := range edits {
		a, b := lineOf(e.start), lineOf(max(e.end, e.start+1)-1)
		if e.end == e.start {
			b = a
		}
		if n := len(groups); n > 0 && a <= groups[n-1].last+1 {
			groups[n-1].last = max(groups[n-1].last, b)
			groups[n-1].edits = append(groups[n-1].edits, e)
			continue
		}
		groups = append(groups, group{a, b, []edit{e}})
	}

	out := []string{"--- a/" + rel, "+++ b/" + rel}
	delta := 0 // new line number minus old, before the current group
	for gi := 0; gi < len(groups); {
		// One hunk: groups whose context windows meet.
		gj := gi
		for gj+1 < len(groups) && groups[gj+1].first-groups[gj].last <= 2*diffContext+1 {
			gj++
		}
		from := max(groups[gi].first-diffContext, 0)
		to := min(groups[gj].last+diffContext, len(lines)-1)
		var body []string
		oldN, newN := 0, 0
		cur := from
		hunkDelta := delta
		for g := gi; g <= gj; g++ {
			for ; cur < groups[g].first; cur++ {
				body = append(body, " "+display(lines[cur]))
				oldN++
				newN++
			}
			segStart, segEnd := starts[groups[g].first], starts[groups[g].last+1]
			var rel []edit
			for _, e := range groups[g].edits {
				rel = append(rel, edit{e.start - segStart, e.end - segStart, e.text})
			}
			newSeg := applyEdits(src[segStart:segEnd], rel)
			for l := groups[g].first; l <= groups[g].last; l++ {
				body = append(body, "-"+display(lines[l]))
				oldN++
			}
			nl := splitLines(newSeg)
			for _, l := range nl {
				body = append(body, "+"+display(l))
			}
			newN += len(nl)
			delta += len(nl) - (groups[g].last - groups[g].first + 1)
			cur = groups[g].last + 1
		}
		for ; cur <= to; cur++ {
			body = append(body, " "+display(lines[cur]))
			oldN++
			newN++
		}
		out = append(out, fmt.Sprintf("@@ -%d,%d +%d,%d @@", from+1, oldN, from+1+hunkDelta, newN))
		out = append(out, body...)
		gi = gj + 1
	}
	return out
}

// splitLines splits after each "\n", keeping it.
func splitLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, b)
			break
		}
		out = append(out, b[:i+1])
		b = b[i+1:]
	}
	return out
}

// display is a line without its line ending.
func display(l []byte) string { return strings.TrimRight(string(l), "\r\n") }
