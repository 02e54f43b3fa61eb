package debug

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"

	"github.com/berth-dev/berth/internal/errclass"
)

// Provider serves the debug tool. It keeps one conversation entry per
// conversation id with a live run: its stored breakpoints, its session (at
// most one) and the last session that ended (for status and output).
type Provider struct {
	cfg     Config
	metrics *metrics.Metrics

	mu       sync.Mutex
	convs    map[string]*conversation
	imported map[string]bool // enclosure, interpreter, module → imports
	// prebuilding is the prebuilds under way or queued, by enclosure and
	// root; building holds a place for each one running
	// (prebuildConcurrency).
	prebuilding map[string]*prebuild
	building    chan struct{}
}

var (
	_ orchestrator.Provider   = (*Provider)(nil)
	_ orchestrator.RunStarter = (*Provider)(nil)
)

// conversation is one conversation's debugging state. lock serialises its
// operations (one-slot semaphore, so waiting can be cancelled); bps is
// touched only under lock; sess, last and refs are under Provider.mu.
type conversation struct {
	id    string
	owner any // run.Owner of the runs that may use it: their connection
	lock  chan struct{}
	bps   map[string][]int // absolute host path (symlinks resolved) → lines

	refs int // runs that joined it
	sess *session
	last *session
	// restarted: a run resumed after Berth restarted made it, so a
	// session the Berth before did not keep, and breakpoints stored
	// while no session ran, ended with it (restartedNote); a kept
	// session is given back (Resume).
	restarted bool
}

// restartedNote is what a conversation made by a resumed run says while
// no session has run in it since (issue 29 item 3): a launched session
// over stdio is given back (Resume), and then the conversation speaks of
// it; the others end with Berth.
const restartedNote = "Berth restarted since this run began: a debug session of this conversation from before the restart that Berth does not keep (delve's, or an attached one) ended with it, and breakpoints stored while no session ran are gone; set breakpoints and launch (or attach) again"

// New builds the provider; cfg must be valid (Validate).
func New(cfg Config, m *metrics.Metrics) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Binaries left by a Berth that was killed before its sessions ended.
	sweepBuilt(os.TempDir(), cfg.SessionTTL+cfg.BuildWait)
	for _, a := range cfg.Adapters {
		if len(a.Prebuild) > 0 {
			m.KnowPrebuild(a.ID)
		}
	}
	return &Provider{cfg: cfg, metrics: m, convs: map[string]*conversation{}, imported: map[string]bool{},
		prebuilding: map[string]*prebuild{}, building: make(chan struct{}, prebuildConcurrency)}, nil
}

// Validate checks what New relies on.
func (c Config) Validate() error {
	for name, d := range map[string]time.Duration{"session_ttl": c.SessionTTL, "stop_wait": c.StopWait, "build_wait": c.BuildWait, "request_wait": c.RequestWait} {
		if d <= 0 {
			return fmt.Errorf("debug.%s must be a positive duration such as 30s, not %s", name, d)
		}
	}
	if c.PrebuildMax < 0 || c.PrebuildMax > maxPrebuilds {
		return fmt.Errorf("debug.prebuild_max is %d: give how many project roots a run prebuilds for at its start, 0 (off) to %d", c.PrebuildMax, maxPrebuilds)
	}
	if c.PrebuildMax > 0 && c.PrebuildTimeout <= 0 {
		return fmt.Errorf("debug.prebuild_timeout must be a positive duration such as 2m, not %s (or set debug.prebuild_max to 0)", c.PrebuildTimeout)
	}
	if c.OutputLimit <= 0 {
		return errors.New("debug.output_limit must be a positive number of bytes")
	}
	if c.Python == "" {
		return errors.New("debug.python must name an interpreter, such as python3 or /usr/bin/python3")
	}
	seen := map[string]bool{}
	for _, a := range c.Adapters {
		switch {
		case a.ID == "" || seen[a.ID]:
			return fmt.Errorf("debug.adapters: every adapter needs a unique id (%q)", a.ID)
		case a.Transport != "stdio" && a.Transport != "tcp":
			return fmt.Errorf("debug.adapters[%s].transport must be stdio or tcp, not %q", a.ID, a.Transport)
		case a.Interpreter == "" && len(a.Executables) == 0:
			return fmt.Errorf("debug.adapters[%s] needs executables (or interpreter: python)", a.ID)
		case a.Interpreter != "" && a.Interpreter != "python":
			return fmt.Errorf("debug.adapters[%s].interpreter must be python or empty, not %q", a.ID, a.Interpreter)
		case len(a.Markers) == 0:
			return fmt.Errorf("debug.adapters[%s] needs at least one root marker", a.ID)
		case len(a.Prebuild) > 0 && a.Prebuild[0] == "":
			return fmt.Errorf("debug.adapters[%s].prebuild must start with a program's name, such as go", a.ID)
		case !envPairs(a.PrebuildEnv):
			return fmt.Errorf("debug.adapters[%s].prebuild_env must hold KEY=VALUE entries, such as CGO_CFLAGS=-O0 -g", a.ID)
		case a.EvaluateContext != "" && a.EvaluateContext != "repl" && a.EvaluateContext != "watch":
			return fmt.Errorf("debug.adapters[%s].evaluate_context must be repl, watch or empty (repl), not %q", a.ID, a.EvaluateContext)
		}
		seen[a.ID] = true
	}
	return nil
}

// Feature is debug.
func (p *Provider) Feature() string { return orchestrator.FeatureDebug }

// Tools offers debug only to a run with a working directory and a
// conversation id: the session is the conversation's.
func (p *Provider) Tools(run *orchestrator.Run) []orchestrator.Tool {
	if run.Workdir == "" || run.ConversationID == "" {
		return nil
	}
	return []orchestrator.Tool{tool{p: p}}
}

// convKey is the run.Value key of a run's membership in its conversation.
type convKey struct{ p *Provider }

// membership is the run's hold on its conversation, taken on the run's
// first debug call and released when the run ends; the entry goes when
// no run holds it and no session lives.
type membership struct {
	p      *Provider
	mu     sync.Mutex
	c      *conversation // nil until joined
	closed bool
}

func (m *membership) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.closed = true
	if m.c == nil {
		return
	}
	m.p.mu.Lock()
	defer m.p.mu.Unlock()
	m.c.refs--
	m.p.dropIfUnused(m.c)
}

// dropIfUnused forgets a conversation no run holds. Called with mu held.
func (p *Provider) dropIfUnused(c *conversation) {
	if c.refs <= 0 && c.sess == nil && p.convs[c.id] == c {
		delete(p.convs, c.id)
	}
}

// errOtherConnection refuses a run whose connection is not the one that
// holds the conversation's debugging: a conversation id alone must not
// let one connection read or end another's program.
var errOtherConnection = fmt.Errorf("a debug session of this conversation belongs to another connection: "+
	"debug from a run started on that connection, or start this run with a conversation id of its own: %w", errclass.ErrConflict)

// join returns the run's conversation entry, creating it on first use.
// The entry belongs to the connection (run.Owner) of the run that made
// it, for as long as it lives: runs of that connection (a subagent's)
// share it, a run of another connection is refused.
func (p *Provider) join(run *orchestrator.Run) (*conversation, error) {
	m := run.Value(convKey{p}, func() any {
		m := &membership{p: p}
		// A call that raced the run's end joins after End ran the run's
		// closers, too late for Value's Close: the context's end still
		// releases it.
		context.AfterFunc(run.Context(), m.Close)
		return m
	}).(*membership)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.c != nil {
		return m.c, nil
	}
	if m.closed {
		return nil, fmt.Errorf("the run has ended: start a new run: %w", orchestrator.ErrRunEnded)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.convs[run.ConversationID]
	if !ok {
		c = &conversation{id: run.ConversationID, owner: run.Owner, lock: make(chan struct{}, 1), bps: map[string][]int{}, restarted: run.Resumed}
		p.convs[run.ConversationID] = c
	}
	if c.owner != run.Owner {
		// Not kept: once the other connection's runs and session are
		// gone, this run may take the conversation.
		return nil, errOtherConnection
	}
	c.refs++
	m.c = c
	return c, nil
}

// current returns the live session and the last ended one.
func (p *Provider) current(c *conversation) (*session, *session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return c.sess, c.last
}

// adopt makes s the conversation's session; when it ends it becomes the
// last one.
func (p *Provider) adopt(c *conversation, s *session) {
	s.onEnd = func(s *session) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if c.sess == s {
			c.sess, c.last = nil, s
		}
		p.dropIfUnused(c)
	}
	p.mu.Lock()
	c.sess = s
	p.mu.Unlock()
}

// storedBreakpoints copies the conversation's breakpoints. Called under
// the conversation's lock.
func (c *conversation) storedBreakpoints() map[string][]int {
	out := make(map[string][]int, len(c.bps))
	for f, l := range c.bps {
		out[f] = append([]int(nil), l...)
	}
	return out
}

// setLines stores lines for file, sorted and without repeats; none
// clears the file. Called under the conversation's lock.
func (c *conversation) setLines(file string, lines []int) []int {
	seen := map[int]bool{}
	var out []int
	for _, l := range lines {
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	sort.Ints(out)
	if len(out) == 0 {
		delete(c.bps, file)
	} else {
		c.bps[file] = out
	}
	return out
}
