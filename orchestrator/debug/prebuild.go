package debug

import (
	"context"
	"errors"
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

// prebuildDrainWait bounds the read of a prebuild's output once its
// process has exited. Under the relay the output ends with the process's
// tree; a process outside the tree (on a host without the relay) could
// hold it open for as long as it lives, and the prebuild, and the end of
// the run that waits for it, would wait as long.
var prebuildDrainWait = 5 * time.Second

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

// prebuild is one prebuild of one root in one enclosure, for the runs
// that share it.
type prebuild struct {
	adapter string
	root    string // host path
	key     string // the enclosure and root: one prebuild runs per key
	queued  time.Time

	// ctx ends when the last run sharing the prebuild ends, a launch in
	// its root comes (yield), or debug.prebuild_timeout passes. It is
	// not a run's: a run that shares the prebuild may outlive the one
	// that started it.
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{} // closed once its process is gone
	refs   int           // runs sharing it; under Provider.mu

	mu      sync.Mutex
	state   string
	started time.Time
	took    time.Duration
	why     string // a failure's last line, or why it ended
}

// errLaunchCame ends a prebuild whose root a launch is about to build:
// the launch does the rest of the work.
var errLaunchCame = errors.New("a launch in its root came first; what it compiled stays in the build cache")

// errRunsEnded ends a prebuild no run shares any more.
var errRunsEnded = errors.New("the runs that wanted it ended")

// errPrebuildTimeout ends a prebuild past debug.prebuild_timeout.
var errPrebuildTimeout = errors.New("it ran past debug.prebuild_timeout; what it compiled stays in the build cache")

// prebuilds are a run's prebuilds. Close (the run's end) lets go of
// them, and ends and waits for those no other run shares.
type prebuilds struct {
	p        *Provider
	mu       sync.Mutex
	closed   bool
	list     []*prebuild
	launched map[string]bool // roots the run launched in: not prebuilt after
	wg       sync.WaitGroup  // start's walk
}

type prebuildsKey struct{ p *Provider }

func (p *Provider) prebuildsOf(run *orchestrator.Run) *prebuilds {
	return run.Value(prebuildsKey{p}, func() any { return &prebuilds{p: p, launched: map[string]bool{}} }).(*prebuilds)
}

// Close lets go of the run's prebuilds once its start's walk is over
// (it adds none after Close), and ends those no other run shares,
// returning when their processes are gone.
func (pb *prebuilds) Close() {
	pb.mu.Lock()
	pb.closed = true
	pb.mu.Unlock()
	pb.wg.Wait()
	pb.mu.Lock()
	list := slices.Clone(pb.list)
	pb.mu.Unlock()
	var last []*prebuild
	pb.p.mu.Lock()
	for _, b := range list {
		if b.refs--; b.refs == 0 {
			last = append(last, b)
		}
	}
	pb.p.mu.Unlock()
	for _, b := range last {
		b.cancel(errRunsEnded)
		<-b.done
	}
}

// RunStarted starts the run's prebuilds in the background (see
// Adapter.Prebuild). A run the debug tool is not offered to (no workdir
// or no conversation id) gets none.
func (p *Provider) RunStarted(run *orchestrator.Run) {
	if run.Workdir == "" || run.ConversationID == "" || p.cfg.PrebuildMax == 0 {
		return
	}
	pb := p.prebuildsOf(run)
	pb.mu.Lock()
	defer pb.mu.Unlock()
	if !pb.closed {
		pb.wg.Go(func() { pb.start(run) })
	}
}

// start finds the roots to prebuild and starts a prebuild for each, up
// to debug.prebuild_max: for each adapter with a prebuild command, in
// catalog order, its roots in the workdir, the shallowest first. A root
// whose prebuild another run has under way in the same enclosure is
// shared, not prebuilt twice. Nothing starts once the run has ended or
// the enclosure says it cannot serve.
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
			n++
			if b, fresh := pb.add(run, a, root); fresh {
				go p.prebuild(run, a, b, exe, nice)
			}
		}
	}
}

// prebuildRoots are the directories of workdir holding one of markers,
// as host paths, the shallowest first, leaving out what go's ./...
// leaves out (testdata, and directories whose names start with _).
func prebuildRoots(workdir string, markers []string) []string {
	var roots []string
	for _, rel := range workspace.Roots(workspace.MarkerDirs(workdir, markers, workspace.MaxMarkerDirs)) {
		if !fixture(rel) {
			roots = append(roots, filepath.Join(workdir, filepath.FromSlash(rel)))
		}
	}
	return roots
}

// fixture says whether a directory (relative, with forward slashes) is
// in a testdata or _-named directory: a test's fixture, not a project.
func fixture(rel string) bool {
	for part := range strings.SplitSeq(rel, "/") {
		if part == "testdata" || strings.HasPrefix(part, "_") {
			return true
		}
	}
	return false
}

// prebuildKey is the key of a prebuild of root in the run's enclosure.
func prebuildKey(run *orchestrator.Run, root string) string {
	return run.Enclosure.Driver() + "\x00" + run.Enclosure.ID() + "\x00" + root
}

// add records a prebuild of root for the run: a new one (fresh, for the
// caller to start), or the one another run has under way in the same
// enclosure, shared. It returns nil once the run has ended or launched
// in root.
func (pb *prebuilds) add(run *orchestrator.Run, a *Adapter, root string) (b *prebuild, fresh bool) {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	if pb.closed || pb.launched[root] {
		return nil, false
	}
	p := pb.p
	key := prebuildKey(run, root)
	p.mu.Lock()
	if b = p.prebuilding[key]; b != nil {
		b.refs++
	} else {
		ctx, cancel := context.WithCancelCause(context.Background())
		b = &prebuild{adapter: a.ID, root: root, key: key, queued: time.Now(), ctx: ctx, cancel: cancel,
			done: make(chan struct{}), refs: 1, state: prebuildQueued}
		p.prebuilding[key] = b
		fresh = true
	}
	p.mu.Unlock()
	pb.list = append(pb.list, b)
	return b, fresh
}

// prebuild waits for a place, runs the prebuild to its end and records
// how it ended.
func (p *Provider) prebuild(run *orchestrator.Run, a *Adapter, b *prebuild, exe, nice string) {
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
	}
	if ctx.Err() != nil { // ended while queued (when both were ready, select picked either)
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
	stderr, stdout := enclosure.NewTail(4<<10), enclosure.NewTail(4<<10)
	cmd := enclosure.Cmd{Path: exe, Args: a.Prebuild[1:], Env: a.PrebuildEnv, Dir: dir, Stderr: stderr}
	if nice != "" {
		cmd.Path, cmd.Args = nice, append([]string{"-n", "19", exe}, a.Prebuild[1:]...)
	}
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
		_, _ = io.Copy(stdout, proc.Stdout())
	}()
	code, err := proc.Wait()
	select {
	case <-drained:
	case <-time.After(prebuildDrainWait):
		// Something outside its tree holds its output open: the
		// prebuild ends with what it read, and the copy when that lets go.
	}
	switch said := strings.TrimSpace(stdout.String()); {
	case ctx.Err() != nil:
		b.end(p.metrics, endedState(ctx), context.Cause(ctx).Error())
	case err != nil:
		b.end(p.metrics, prebuildFailed, enclosure.Say(err))
	case code != 0:
		b.end(p.metrics, prebuildFailed, fmt.Sprintf("exit status %d: %s", code, text.Line(lastLine(stderr.String()))))
	case said != "":
		b.end(p.metrics, prebuildFailed, text.Line(lastLine(said)))
	default:
		b.end(p.metrics, prebuildDone, "")
	}
}

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

// yield keeps root from being prebuilt for the run from now on, and ends
// a prebuild of root in the run's enclosure (whichever runs share it),
// waiting for its process to be gone or ctx to end: a launch there is
// about to build, and two compilers of the same packages would only
// share the processors.
func (p *Provider) yield(ctx context.Context, run *orchestrator.Run, root string) {
	pb := p.prebuildsOf(run)
	pb.mu.Lock()
	pb.launched[root] = true
	pb.mu.Unlock()
	p.mu.Lock()
	b := p.prebuilding[prebuildKey(run, root)]
	p.mu.Unlock()
	if b == nil {
		return
	}
	b.cancel(errLaunchCame)
	select {
	case <-b.done:
	case <-ctx.Done():
	}
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
