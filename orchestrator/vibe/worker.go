package vibe

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/orchestrator"
)

// Worker statuses, as vibe_list shows them.
const (
	statusRunning   = "running"
	statusSucceeded = "succeeded"
	statusFailed    = "failed"
	statusKilled    = "killed"
)

// Why Berth stops an attempt.
const (
	stopKilled     = "killed"     // vibe_kill or the run ended
	stopSuperseded = "superseded" // vibe_send reruns with a longer assignment
)

// worker is one background worker. Every field below op is guarded by its
// pool's mutex.
type worker struct {
	id, label, tier string
	argv            []string

	// op serialises vibe_send and vibe_kill on this worker, so a rerun
	// never overlaps a kill.
	op sync.Mutex

	brief    string
	messages []string
	// surface is that of the call that started the current attempt
	// (vibe_spawn, or vibe_send's rerun): the worker is told it.
	surface orchestrator.Surface
	status  string
	// gone is set once the worker's session has ended (vibe_kill or the
	// run's end), so it is counted once.
	gone bool
	cur  *attempt
	// settled is closed when status leaves running; a rerun makes a new one.
	settled chan struct{}
}

// attempt is one run of the worker's command over its assignment so far.
type attempt struct {
	proc    enclosure.Process // nil when the command could not start
	started time.Time
	done    chan struct{} // closed once the outcome is recorded

	// Guarded by the pool's mutex.
	stop  string
	ended time.Time // zero while the process runs
	out   outcome
}

// outcome is what an attempt left behind.
type outcome struct {
	stdout, stdoutCut string
	stderr, stderrCut string
	code              int
	err               error // could not start, or could not be waited for
}

// surfaceEnv is the environment variable that tells a worker the surface
// it was started from ("full", "plan" or "readonly"), and surfaceArg the
// placeholder of vibe.runners replaced with it: Berth's gate on surfaces
// stops at the worker's process, so a worker started from plan or
// readonly must refuse to write with its own tools.
const (
	surfaceEnv = "BERTH_SURFACE"
	surfaceArg = "{surface}"
)

// command is the worker's argv for an attempt, told its surface, and
// the environment it adds.
func (w *worker) command() (argv, env []string) {
	argv = make([]string, len(w.argv))
	for i, a := range w.argv {
		argv[i] = strings.ReplaceAll(a, surfaceArg, string(w.surface))
	}
	return argv, []string{surfaceEnv + "=" + string(w.surface)}
}

// assignment is what the worker reads on stdin: the brief, then each
// message under a heading, so the worker can tell later instructions from
// the original brief.
func assignment(brief string, messages []string) string {
	var b strings.Builder
	b.WriteString(brief)
	b.WriteString("\n")
	for i, m := range messages {
		fmt.Fprintf(&b, "\n--- Follow-up message %d from the lead agent (it takes precedence over the brief where they differ) ---\n\n%s\n", i+1, m)
	}
	return b.String()
}

// elapsed is how long the attempt ran, or has run so far.
func (a *attempt) elapsed(now time.Time) time.Duration {
	end := a.ended
	if end.IsZero() {
		end = now
	}
	return end.Sub(a.started)
}

// startFailure is the record of an attempt whose command did not start.
func startFailure(err error) *attempt {
	now := time.Now()
	done := make(chan struct{})
	close(done)
	return &attempt{started: now, ended: now, done: done, out: outcome{err: err}}
}
