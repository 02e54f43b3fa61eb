package lsp

import (
	"strings"

	"github.com/berth-dev/berth/enclosure"
)

// ring keeps the last bytes of a server's stderr, for status and for the
// error when it will not start.
type ring struct{ *enclosure.Tail }

func newRing(n int) *ring { return &ring{enclosure.NewTail(n)} }

// tail returns up to the last lines lines.
func (r *ring) tail(lines int) string {
	s, dropped := r.Snapshot()
	cut := dropped > 0
	s = strings.TrimRight(s, "\n")
	all := strings.Split(s, "\n")
	if len(all) > lines {
		all, cut = all[len(all)-lines:], true
	}
	if s == "" {
		return ""
	}
	if cut {
		return "…\n" + strings.Join(all, "\n")
	}
	return strings.Join(all, "\n")
}

// excerpt returns the first head and last tail lines, with a marker
// between them when lines were left out: a start failure's reason is
// usually at the top, a crash's at the bottom.
func (r *ring) excerpt(head, tail int) string {
	s, dropped := r.Snapshot()
	s = strings.TrimRight(s, "\n")
	cut := dropped > 0
	if s == "" {
		return ""
	}
	all := strings.Split(s, "\n")
	if len(all) > head+tail {
		all = append(append(all[:head:head], "…"), all[len(all)-tail:]...)
	}
	if cut {
		all = append([]string{"…"}, all...)
	}
	return strings.Join(all, "\n")
}
