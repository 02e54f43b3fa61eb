package vibe

import (
	"fmt"
	"strings"
	"time"
)

// view is a worker's state copied under the pool's lock, for reporting.
type view struct {
	id, label, tier, status string
	elapsed                 time.Duration
	messages                int
	out                     outcome
}

func (p *pool) view(w *worker) view {
	p.mu.Lock()
	defer p.mu.Unlock()
	return viewLocked(w, time.Now())
}

func (p *pool) list() []view {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	out := make([]view, len(p.workers))
	for i, w := range p.workers {
		out[i] = viewLocked(w, now)
	}
	return out
}

func viewLocked(w *worker, now time.Time) view {
	v := view{id: w.id, label: w.label, tier: w.tier, status: w.status,
		elapsed: w.cur.elapsed(now), messages: len(w.messages)}
	if w.status != statusRunning {
		v.out = w.cur.out
	}
	return v
}

// name is how a worker is named in a sentence.
func (v view) name() string { return fmt.Sprintf("%s (%q, tier %s)", v.id, v.label, v.tier) }

// report is the full account of a settled worker: its result, and for a
// failure why.
func (v view) report() string {
	var b strings.Builder
	switch v.status {
	case statusSucceeded:
		fmt.Fprintf(&b, "%s succeeded after %s.\n\nResult (stdout):\n%s", v.name(), round(v.elapsed), orNone(v.out.stdout))
		if v.out.stdoutCut != "" {
			b.WriteString("\n" + v.out.stdoutCut)
		}
	case statusFailed:
		fmt.Fprintf(&b, "%s failed after %s: %s.", v.name(), round(v.elapsed), v.out.cause())
		if v.out.err == nil || v.out.stdout != "" {
			fmt.Fprintf(&b, "\n\nstdout:\n%s", orNone(v.out.stdout))
			if v.out.stdoutCut != "" {
				b.WriteString("\n" + v.out.stdoutCut)
			}
		}
		if v.out.stderr != "" {
			fmt.Fprintf(&b, "\n\nstderr:\n%s", v.out.stderr)
			if v.out.stderrCut != "" {
				b.WriteString("\n" + v.out.stderrCut)
			}
		}
		b.WriteString("\n\nSteer it with vibe_send (it reruns with your message added), or vibe_kill it.")
	case statusKilled:
		fmt.Fprintf(&b, "%s was killed; its output is gone. Spawn a new worker if the work is still needed.", v.name())
	default:
		fmt.Fprintf(&b, "%s is running (%s so far).", v.name(), round(v.elapsed))
	}
	return b.String()
}

// cause says why an attempt failed.
func (o outcome) cause() string {
	switch {
	case o.err != nil:
		return o.err.Error()
	case o.code < 0:
		return "it was ended by a signal"
	}
	return fmt.Sprintf("exit status %d", o.code)
}

// summary is the last result on one line, cut to n characters.
func (v view) summary(n int) string {
	var s string
	switch v.status {
	case statusRunning, statusKilled:
		return "-"
	case statusFailed:
		s = v.out.cause()
		if line := lastLine(v.out.stderr); line != "" {
			s += ": " + line
		}
	default:
		s = v.out.stdout
	}
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "(no output)"
	}
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func orNone(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(no output)"
	}
	return s
}

// round shows durations to a tenth of a second.
func round(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }
