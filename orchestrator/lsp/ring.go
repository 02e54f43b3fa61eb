package lsp

import (
	"strings"
	"sync"
)

// ring keeps the last n bytes written to it: a server's stderr, for
// status and for the error when it will not start.
type ring struct {
	mu  sync.Mutex
	n   int
	buf []byte
	cut bool
}

func newRing(n int) *ring { return &ring{n: n} }

func (r *ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, p...)
	if over := len(r.buf) - r.n; over > 0 {
		r.buf = append(r.buf[:0], r.buf[over:]...)
		r.cut = true
	}
	return len(p), nil
}

// tail returns up to the last lines lines.
func (r *ring) tail(lines int) string {
	r.mu.Lock()
	s := string(r.buf)
	cut := r.cut
	r.mu.Unlock()
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
	r.mu.Lock()
	s := strings.TrimRight(string(r.buf), "\n")
	cut := r.cut
	r.mu.Unlock()
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
