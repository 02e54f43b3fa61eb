package debug

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// A prebuild compiles, at run/start, what a run's first launch would
// compile first (Adapter.Prebuild: delve's build of the program and of
// every package it imports), so that the launch finds it in the build
// cache and only links. In a fresh container the standard library is in
// the image's cache, but a project's own packages and its dependencies
// are not: delve compiled them at the first launch, in the agent's
// time. The prebuild does it in the agent's thinking time instead, at
// the lowest CPU priority, so a language server loading meanwhile keeps
// the processors.

// maxPrebuilds bounds debug.prebuild_max.
const maxPrebuilds = 8

// prebuildConcurrency is how many prebuilds run at once across every
// run: a burst of run/starts does not start a compiler per run.
const prebuildConcurrency = 2

// maxRootDirs bounds the walk that looks for the roots to prebuild, as
// lsp bounds its own.
const maxRootDirs = 5000

// The states of a prebuild, as status says them and
// berth_debug_prebuilds_total counts the ended ones.
const (
	prebuildQueued    = "queued"
	prebuildRunning   = "running"
	prebuildDone      = "done"
	prebuildFailed    = "failed"
	prebuildTimedOut  = "timeout"
	prebuildCancelled = "cancelled"
)

// prebuild is one prebuild of one root for one run.
type prebuild struct {
	adapter string
	root    string // host path
	key     string // the enclosure and root: one prebuild runs per key
	queued  time.Time

	ctx    context.Context // ends with the run, a launch in its root (yield) or the timeout
	cancel context.CancelCauseFunc
	done   chan struct{}

	mu      sync.Mutex
	state   string
	started time.Time
	took    time.Duration
	why     string // a failure's last line, or why it was cancelled
}

// errLaunchCame cancels a prebuild whose root a launch is about to
// build: the launch does the rest of the work.
var errLaunchCame = fmt.Errorf("a launch in its root came first; what it compiled stays in the build cache")

// prebuilds are a run's prebuilds; Close (the run's end) ends them and
// waits for their processes to be gone.
type prebuilds struct {
	p    *Provider
	mu   sync.Mutex
	list []*prebuild
	wg   sync.WaitGroup
}

type prebuildsKey struct{ p *Provider }

func (p *Provider) prebuildsOf(run *orchestrator.Run) *prebuilds {
	return run.Value(prebuildsKey{p}, func() any { return &prebuilds{p: p} }).(*prebuilds)
}

// Close cancels the run's prebuilds and waits for them to end.
func (pb *prebuilds) Close() {
	pb.mu.Lock()
	list := slices.Clone(pb.list)
	pb.mu.Unlock()
	for _, b := range list {
		b.cancel(orchestrator.ErrRunEnded)
	}
	pb.wg.Wait()
}

// RunStarted starts the run's prebuilds in the background (see
// Adapter.Prebuild). A run the debug tool is not offered to (no workdir
// or no conversation id) gets none.
func (p *Provider) RunStarted(run *orchestrator.Run) {
	if run.Workdir == "" || run.ConversationID == "" || p.cfg.PrebuildMax == 0 {
		return
	}
	pb := p.prebuildsOf(run)
	pb.wg.Go(func() { pb.start(run) })
}

// start finds the roots to prebuild and starts a prebuild for each, up
// to debug.prebuild_max: for each adapter with a prebuild command, in
// catalog order, its roots in the workdir, the shallowest first. A root
// whose prebuild another run has under way in the same enclosure is not
// prebuilt twice, and counts as one of the run's. Nothing starts once
// the run has ended or the enclosure says it cannot serve.
func (pb *prebuilds) start(run *orchestrator.Run) {
	ctx := run.Context()
	p := pb.p
	n := 0
	for i := range p.cfg.Adapters {
		a := &p.cfg.Adapters[i]
		if len(a.Prebuild) == 0 {
			continue
		}
		roots := prebuildRoots(run.Workdir, a.Markers)
		if len(roots) == 0 {
			continue
		}
		if _, why := p.executable(ctx, run, a); why != "" {
			continue
		}
		exe, err := run.Enclosure.LookPath(ctx, a.Prebuild[0])
		if err != nil {
			if ctx.Err() != nil || enclosure.Down(err) {
				return
			}
			continue
		}
		// nice is coreutils': every image with a shell has it. Without
		// it the prebuild runs at the normal priority.
		nice, _ := run.Enclosure.LookPath(ctx, "nice")
		for _, root := range roots {
			if n == p.cfg.PrebuildMax || ctx.Err() != nil {
				return
			}
			n++ // a root another run's prebuild has under way counts too
			if b := pb.add(run, a, root); b != nil {
				pb.wg.Go(func() { pb.run(run, a, b, exe, nice) })
			}
		}
	}
}

// prebuildRoots are the directories of workdir holding one of markers,
// as host paths, the shallowest first.
func prebuildRoots(workdir string, markers []string) []string {
	seen := map[string]bool{}
	var rels []string
	for _, ds := range workspace.MarkerDirs(workdir, markers, maxRootDirs) {
		for _, d := range ds {
			if !seen[d] {
				seen[d] = true
				rels = append(rels, d)
			}
		}
	}
	depth := func(rel string) int {
		if rel == "." {
			return 0
		}
		return strings.Count(rel, "/") + 1
	}
	slices.SortFunc(rels, func(x, y string) int {
		if dx, dy := depth(x), depth(y); dx != dy {
			return dx - dy
		}
		return strings.Compare(x, y)
	})
	roots := make([]string, len(rels))
	for i, r := range rels {
		roots[i] = filepath.Join(workdir, filepath.FromSlash(r))
	}
	return roots
}

// add records a queued prebuild of root for the run, or returns nil when
// one of the same enclosure and root is under way (another run's).
func (pb *prebuilds) add(run *orchestrator.Run, a *Adapter, root string) *prebuild {
	p := pb.p
	key := run.Enclosure.Driver() + "\x00" + run.Enclosure.ID() + "\x00" + root
	ctx, cancel := context.WithCancelCause(run.Context())
	b := &prebuild{adapter: a.ID, root: root, key: key, queued: time.Now(), ctx: ctx, cancel: cancel, done: make(chan struct{}), state: prebuildQueued}
	p.mu.Lock()
	if p.prebuilding[key] != nil {
		p.mu.Unlock()
		cancel(nil)
		return nil
	}
	p.prebuilding[key] = b
	p.mu.Unlock()
	pb.mu.Lock()
	pb.list = append(pb.list, b)
	pb.mu.Unlock()
	return b
}

// run waits for a place, runs the prebuild to its end and records how it
// ended.
func (pb *prebuilds) run(run *orchestrator.Run, a *Adapter, b *prebuild, exe, nice string) {
	p := pb.p
	defer close(b.done)
	defer func() {
		p.mu.Lock()
		if p.prebuilding[b.key] == b {
			delete(p.prebuilding, b.key)
		}
		p.mu.Unlock()
	}()
	defer b.cancel(nil)
	ctx := b.ctx
	select {
	case p.building <- struct{}{}:
	case <-ctx.Done():
		b.end(p.metrics, prebuildCancelled, context.Cause(ctx).Error())
		return
	}
	defer func() { <-p.building }()

	ctx, stop := context.WithTimeoutCause(ctx, p.cfg.PrebuildTimeout, errPrebuildTimeout)
	defer stop()
	dir, err := run.Enclosure.MapPath(b.root)
	if err != nil {
		b.end(p.metrics, prebuildFailed, err.Error())
		return
	}
	cmd := enclosure.Cmd{Path: exe, Args: a.Prebuild[1:], Env: a.PrebuildEnv, Dir: dir, Stderr: enclosure.NewTail(4 << 10)}
	if nice != "" {
		cmd.Path, cmd.Args = nice, append([]string{"-n", "19", exe}, a.Prebuild[1:]...)
	}
	stderr := cmd.Stderr.(*enclosure.Tail)
	b.mu.Lock()
	b.state, b.started = prebuildRunning, time.Now()
	b.mu.Unlock()
	p.metrics.DebugPrebuildsRunning.Inc()
	defer p.metrics.DebugPrebuildsRunning.Dec()
	proc, err := run.Enclosure.Start(ctx, cmd)
	if err != nil {
		if ctx.Err() != nil {
			b.end(p.metrics, endedState(ctx), context.Cause(ctx).Error())
			return
		}
		b.end(p.metrics, prebuildFailed, "it did not start: "+enclosure.Say(err))
		return
	}
	kill := context.AfterFunc(ctx, func() { _ = proc.Kill() })
	defer kill()
	_ = proc.Stdin().Close()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		_, _ = io.Copy(io.Discard, proc.Stdout())
	}()
	code, err := proc.Wait()
	select {
	case <-drained:
	case <-time.After(5 * time.Second):
		// Something it started holds its output open (a build daemon):
		// it ends with the prebuild.
		_ = proc.Kill()
		<-drained
	}
	switch {
	case ctx.Err() != nil:
		b.end(p.metrics, endedState(ctx), context.Cause(ctx).Error())
	case err != nil:
		b.end(p.metrics, prebuildFailed, enclosure.Say(err))
	case code != 0:
		b.end(p.metrics, prebuildFailed, fmt.Sprintf("exit status %d: %s", code, text.Line(lastLine(stderr.String()))))
	default:
		b.end(p.metrics, prebuildDone, "")
	}
}

// errPrebuildTimeout is a prebuild's cause when debug.prebuild_timeout
// ends it.
var errPrebuildTimeout = fmt.Errorf("it ran past debug.prebuild_timeout; what it compiled stays in the build cache")

// endedState is the state of a prebuild whose context ended.
func endedState(ctx context.Context) string {
	if context.Cause(ctx) == errPrebuildTimeout {
		return prebuildTimedOut
	}
	return prebuildCancelled
}

// end records how the prebuild ended, and counts it.
func (b *prebuild) end(m *metrics.Metrics, state, why string) {
	b.mu.Lock()
	b.state, b.why = state, why
	if !b.started.IsZero() {
		b.took = time.Since(b.started)
	}
	b.mu.Unlock()
	m.DebugPrebuilds.WithLabelValues(b.adapter, state).Inc()
	if state == prebuildDone {
		m.DebugPrebuildDuration.WithLabelValues(b.adapter).Observe(b.took.Seconds())
	}
}

// yield ends a prebuild of root in the run's enclosure, whichever run
// started it, and waits for its process to be gone: a launch there is
// about to build, and two compilers of the same packages would only
// share the processors.
func (p *Provider) yield(run *orchestrator.Run, root string) {
	key := run.Enclosure.Driver() + "\x00" + run.Enclosure.ID() + "\x00" + root
	p.mu.Lock()
	b := p.prebuilding[key]
	p.mu.Unlock()
	if b == nil {
		return
	}
	b.cancel(errLaunchCame)
	<-b.done
}

// describe is the run's prebuilds, a line each, for status; "" when it
// has none.
func (pb *prebuilds) describe(workdir string) string {
	pb.mu.Lock()
	list := slices.Clone(pb.list)
	pb.mu.Unlock()
	var lines []string
	for _, b := range list {
		b.mu.Lock()
		where := workspace.Rel(workdir, b.root)
		if where == "." {
			where = "the working directory"
		}
		line := fmt.Sprintf("prebuild (%s, %s): ", b.adapter, where)
		switch b.state {
		case prebuildQueued:
			line += fmt.Sprintf("queued for %s, behind other runs' prebuilds", time.Since(b.queued).Round(time.Millisecond))
		case prebuildRunning:
			line += fmt.Sprintf("running for %s; a launch there now ends it and compiles the rest itself", time.Since(b.started).Round(time.Millisecond))
		case prebuildDone:
			line += fmt.Sprintf("done in %s: a launch there finds its packages compiled", b.took.Round(time.Millisecond))
		case prebuildFailed:
			line += fmt.Sprintf("failed after %s (%s); a launch there compiles what it did not, and says what fails", b.took.Round(time.Millisecond), b.why)
		case prebuildTimedOut:
			line += fmt.Sprintf("ended after %s: %s", b.took.Round(time.Millisecond), b.why)
		case prebuildCancelled:
			line += "ended: " + b.why
		}
		b.mu.Unlock()
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// envPairs says whether every entry is KEY=VALUE with a key.
func envPairs(env []string) bool {
	for _, e := range env {
		if i := strings.IndexByte(e, '='); i <= 0 {
			return false
		}
	}
	return true
}
