package orchestrator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/internal/errclass"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

// DefaultCallTimeout bounds a tool call whose Spec names no timeout.
const DefaultCallTimeout = 15 * time.Minute

// Registry knows the providers and dispatches calls. It is safe for
// concurrent use.
type Registry struct {
	metrics     *metrics.Metrics
	callTimeout time.Duration

	mu        sync.Mutex
	providers []Provider
	observer  WriteObserver
	schemas   map[string]compiled // by tool name
}

// NewRegistry builds an empty registry. callTimeout bounds calls whose
// Spec names none (zero: DefaultCallTimeout).
func NewRegistry(m *metrics.Metrics, callTimeout time.Duration) *Registry {
	if callTimeout <= 0 {
		callTimeout = DefaultCallTimeout
	}
	return &Registry{metrics: m, callTimeout: callTimeout, schemas: map[string]compiled{}}
}

// Metrics returns the registry's collectors.
func (g *Registry) Metrics() *metrics.Metrics { return g.metrics }

// Add adds a provider and creates its tools' series at zero.
func (g *Registry) Add(p Provider) {
	g.mu.Lock()
	g.providers = append(g.providers, p)
	g.mu.Unlock()
	g.knowTools(p)
}

// knowTools creates the provider's tool series at zero, so that they
// exist from the first scrape and each tool's first call shows in rate().
// A provider's Tools reads the run only to leave tools out (no workdir,
// no conversation), so a run with both is offered them all; it is never
// started or called.
func (g *Registry) knowTools(p Provider) {
	probe := NewRun("", "metrics", "/", nil, nil, nil)
	defer probe.End(EndStopped)
	for _, t := range p.Tools(probe) {
		sp := t.Spec()
		g.metrics.KnowTool(sp.Name, sp.Tier.String())
	}
}

// SetWriteObserver sets who hears files/willWrite and files/didWrite.
func (g *Registry) SetWriteObserver(o WriteObserver) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.observer = o
}

// WriteObserver returns the observer, or nil.
func (g *Registry) WriteObserver() WriteObserver {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.observer
}

// RunStarted tells the providers whose feature is on for the run that it
// has started (RunStarter). Runs.OnStart calls it.
func (g *Registry) RunStarted(run *Run) {
	g.mu.Lock()
	ps := append([]Provider(nil), g.providers...)
	g.mu.Unlock()
	for _, p := range ps {
		if s, ok := p.(RunStarter); ok && run.Feature(p.Feature()) {
			s.RunStarted(run)
		}
	}
}

// Shutdown ends what the providers keep beyond their runs (Shutdowner),
// all at once, and waits for them. Berth calls it when it stops, after
// ending every run.
func (g *Registry) Shutdown() {
	g.mu.Lock()
	ps := append([]Provider(nil), g.providers...)
	g.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range ps {
		if s, ok := p.(Shutdowner); ok {
			wg.Go(s.Shutdown)
		}
	}
	wg.Wait()
}

// Features lists the features some provider serves.
func (g *Registry) Features() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var f []string
	for _, p := range g.providers {
		f = append(f, p.Feature())
	}
	sort.Strings(f)
	return f
}

// offered yields every tool offered for the run (feature connected),
// whatever the surface, with its spec. Each Spec is asked for once: a
// provider may build it.
func (g *Registry) offered(run *Run) iter.Seq2[Tool, Spec] {
	g.mu.Lock()
	ps := append([]Provider(nil), g.providers...)
	g.mu.Unlock()
	return func(yield func(Tool, Spec) bool) {
		for _, p := range ps {
			if !run.Feature(p.Feature()) {
				continue
			}
			for _, t := range p.Tools(run) {
				if !yield(t, t.Spec()) {
					return
				}
			}
		}
	}
}

// find returns the run's tool of that name (feature connected) and its
// spec; ok is false when there is none.
func (g *Registry) find(run *Run, name string) (Tool, Spec, bool) {
	for t, sp := range g.offered(run) {
		if sp.Name == name {
			return t, sp, true
		}
	}
	return nil, Spec{}, false
}

// Tier is the tier of the run's tool of that name; ok is false when the
// run has none.
func (g *Registry) Tier(run *Run, name string) (tier Tier, ok bool) {
	_, sp, ok := g.find(run, name)
	return sp.Tier, ok
}

// List returns the specs of the tools the surface may see for the run,
// sorted by name.
func (g *Registry) List(run *Run, s Surface) []Spec {
	var specs []Spec
	for _, sp := range g.offered(run) {
		if sp.Tier <= s.MaxTier() {
			specs = append(specs, sp)
		}
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i].Name < specs[j].Name })
	return specs
}

// Call dispatches one tool call. Every refusal and argument problem is an
// error Result the model can act on; a Go error means broken
// infrastructure. A panicking tool becomes an error result.
func (g *Registry) Call(ctx context.Context, run *Run, s Surface, name string, args json.RawMessage) (res *Result, err error) {
	if ended, why := run.Ended(); ended {
		return nil, fmt.Errorf("run %s has ended (%s): start a new run: %w", run.ID, why, ErrRunEnded)
	}
	run.begin()
	defer run.done()

	tool, spec, ok := g.find(run, name)
	if !ok {
		g.count("unknown", "", "refused") // never a caller's string as a label
		return g.unknownTool(run, s, name), nil
	}
	tier := spec.Tier.String()
	if spec.Tier > s.MaxTier() {
		g.count(name, tier, "refused")
		return Errorf("tool %s (tier %s) is not allowed on the %s surface, which may only use read-tier tools; ask the full agent to run it", name, spec.Tier, s).Classed(errclass.ErrPermission), nil
	}
	sch, err := g.schema(spec)
	if err != nil {
		return nil, err
	}
	args = ArgsOrEmpty(args)
	if msg := validateArgs(name, sch, args); msg != "" {
		g.count(name, tier, "invalid")
		return Errorf("invalid arguments for %s: %s. Fix the arguments and call again.", name, msg).Classed(errclass.ErrInvalid), nil
	}

	timeout := spec.Timeout
	if timeout <= 0 {
		timeout = g.callTimeout
	}
	caller := ctx
	ctx, cancel := context.WithTimeout(withSurface(caller, s), timeout)
	defer cancel()
	stop := context.AfterFunc(run.Context(), cancel)
	defer stop()

	var lock chan struct{}
	if !spec.ParallelSafe {
		lock = run.toolLock(name)
		select {
		case lock <- struct{}{}:
		case <-ctx.Done():
			g.count(name, tier, "canceled")
			return Errorf("%s was not started: an earlier %s call on this run is still running and this call was cancelled or timed out while waiting", name, name).Classed(ctx.Err()), nil
		}
	}

	start := time.Now()
	out := g.start(ctx, run, tool, name, args, lock)
	downs, stopWatch := watchDown(ctx, run)
	defer stopWatch()
	var o outcome
	var down error
	select {
	case o = <-out.done:
	case down = <-downs:
		// The run's container was paused, stopped or removed under the
		// call: the call cannot end well, and a paused one would wait
		// out its timeout. The tool is cancelled and gets a short grace
		// to answer for itself (a cell's output so far).
		cancel()
		var ok bool
		if o, ok = g.await(out, DownGrace); !ok {
			o = outcome{abandoned: true}
		}
	case <-ctx.Done():
		// The tool's own answer to its cancellation (what an interrupted
		// cell printed) is worth its grace.
		grace := spec.CancelGrace
		if grace <= 0 {
			grace = DefaultCancelGrace
		}
		var ok bool
		if o, ok = g.await(out, grace); !ok {
			o = abandoned(caller, ctx, run, name, timeout)
		}
	}
	g.metrics.ToolCallDuration.WithLabelValues(name, tier).Observe(time.Since(start).Seconds())
	res, err = o.res, o.err
	switch {
	case down != nil:
		g.count(name, tier, "error")
		return enclosureDown(name, down, res, err), nil
	case o.panicked != nil:
		g.count(name, tier, "panic")
		slog.Error("tool panicked", "tool", name, "run", run.ID, "panic", o.panicked, "stack", string(o.stack))
		return Errorf("%s failed with an internal error (%v); the run is intact: call again, and report this if it repeats", name, o.panicked), nil
	case o.abandoned && caller.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		g.count(name, tier, "timeout")
	case o.abandoned:
		g.count(name, tier, "canceled")
	case err != nil:
		g.count(name, tier, "error")
	case ctx.Err() == context.DeadlineExceeded:
		g.count(name, tier, "timeout")
	case res != nil && res.IsError:
		g.count(name, tier, "error")
	default:
		g.count(name, tier, "ok")
	}
	if err == nil && res == nil {
		res = Text("")
	}
	if o.panicked == nil && caller.Err() == nil && (res != nil && res.IsError || err != nil && !errors.Is(err, ErrRunEnded)) {
		if ended, _ := run.Ended(); !ended {
			if down := checkEnclosure(caller, run); down != nil {
				return enclosureDown(name, down, res, err), nil
			}
		}
	}
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return Errorf("%s timed out after %s: %v", name, timeout, err).Classed(errclass.ErrTimeout), nil
	}
	if err != nil && !errors.Is(err, ErrRunEnded) {
		// A tool's failure is the model's to act on: an error result
		// carrying the class, never a protocol error. Only a run that
		// ended under the call is the protocol's (-32002).
		return Failed(fmt.Errorf("%s: %w", name, err)), nil
	}
	return res, err
}

// DownFirst and DownEvery pace watchDown: a call still running after
// DownFirst asks its run's enclosure whether it still serves, and again
// every DownEvery. A call that ends sooner asks nothing.
const (
	DownFirst = 500 * time.Millisecond
	DownEvery = 2 * time.Second
)

// DownGrace is how long a tool whose enclosure went down under its call
// has, once cancelled, to answer for itself before the enclosure's error
// answers for it.
const DownGrace = 500 * time.Millisecond

// watchDown watches the run's enclosure while a call runs, until ctx
// ends or stop is called, and sends its error once it is paused, stopped
// or removed (enclosure.ErrPaused, ErrGone): a paused container's
// processes answer nothing and no call in it would end before its
// timeout (issue 27 item 3). An engine that does not answer is not sent:
// the processes already running may still answer. Nothing runs before
// DownFirst; an enclosure that cannot say (the host) says nil.
func watchDown(ctx context.Context, run *Run) (down <-chan error, stop func()) {
	if run.Enclosure == nil {
		return nil, func() {}
	}
	ch := make(chan error, 1)
	var mu sync.Mutex
	var t *time.Timer
	stopped := false
	look := func() {
		if ctx.Err() != nil {
			return
		}
		if err := enclosure.Check(ctx, run.Enclosure); errors.Is(err, enclosure.ErrPaused) || errors.Is(err, enclosure.ErrGone) {
			ch <- err
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !stopped && ctx.Err() == nil {
			t.Reset(DownEvery)
		}
	}
	mu.Lock()
	t = time.AfterFunc(DownFirst, look)
	mu.Unlock()
	return ch, func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

// checkEnclosure asks the run's enclosure, once a call failed or hung,
// whether it still serves: a container that stopped, was removed or is
// paused, or an engine that does not answer, is the cause then, whatever
// the tool made of it ("not on the PATH", "context deadline exceeded").
func checkEnclosure(caller context.Context, run *Run) error {
	if run.Enclosure == nil {
		return nil
	}
	return enclosure.Check(caller, run.Enclosure)
}

// enclosureDown is a failed call's answer when its enclosure is down
// (issue 24 item 11): the enclosure's error, which names the container
// and says what to do (start it, unpause it, check the engine). A tool
// that said so itself keeps its answer; any other tool's answer was a
// consequence that would send the agent the wrong way ("context deadline
// exceeded", "the adapter may be busy or stuck") and is only logged.
func enclosureDown(name string, down error, res *Result, err error) *Result {
	var said string
	switch {
	case err != nil:
		said = err.Error()
	case res != nil:
		said = res.FirstText()
	}
	if res != nil && err == nil && strings.Contains(said, enclosure.Say(down)) {
		res.IsError = true
		return res.Classed(down)
	}
	slog.Debug("a call failed in an enclosure that is down; its own answer is replaced", "tool", name, "answer", said, "enclosure", down)
	return Errorf("%s could not do its work: %s.", name, enclosure.Say(down)).Classed(down)
}

// DefaultCancelGrace is how long a tool whose Spec names no CancelGrace
// has, once its call is cancelled, past its deadline or its run has
// ended, to give its own answer.
const DefaultCancelGrace = 2 * time.Second

// outcome is what a tool's Call returned, or that it panicked, or that
// the call was answered without it (abandoned).
type outcome struct {
	res       *Result
	err       error
	panicked  any
	stack     []byte
	abandoned bool
}

// call is one tool call's work, running on its own goroutine so that the
// call can be answered even when the work never returns (a read of a
// FIFO, a library call that ignores its context).
type call struct {
	done chan outcome // buffered: the work never waits for a reader
	// state moves from running to finished, or to abandoned (answered
	// without the work) and then to finished when the work returns.
	state atomic.Int32
}

const (
	callRunning int32 = iota
	callAbandoned
	callFinished
)

// start runs the tool on a goroutine of its own. The per-tool lock, when
// held, is released when the work returns, not when the call is answered:
// the next call of a serialised tool must not overlap work still running.
func (g *Registry) start(ctx context.Context, run *Run, tool Tool, name string, args json.RawMessage, lock chan struct{}) *call {
	c := &call{done: make(chan outcome, 1)}
	go func() {
		var o outcome
		defer func() {
			if p := recover(); p != nil {
				o = outcome{panicked: p, stack: debug.Stack()}
			}
			if lock != nil {
				<-lock
			}
			c.done <- o
			if c.state.Swap(callFinished) == callAbandoned {
				g.metrics.StuckCalls.Dec()
				slog.Warn("a tool call answered at its deadline or cancellation has now returned", "tool", name, "run", run.ID)
			}
		}()
		o.res, o.err = tool.Call(ctx, run, args)
	}()
	return c
}

// await gives the work of a call whose context has ended grace to
// answer for itself: a cell's output so far, a session's state. ok is
// false when it did not, and the call is now abandoned; the work is then
// counted in berth_stuck_calls until it returns.
func (g *Registry) await(c *call, grace time.Duration) (o outcome, ok bool) {
	if grace > 0 {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case o = <-c.done:
			return o, true
		case <-t.C:
		}
	}
	// Counted before the state says so, so that a return racing with
	// this never takes the gauge below zero.
	g.metrics.StuckCalls.Inc()
	if !c.state.CompareAndSwap(callRunning, callAbandoned) {
		g.metrics.StuckCalls.Dec()
		return <-c.done, true
	}
	return outcome{}, false
}

// abandoned is the answer to a call whose work did not return within
// its grace after its context ended: the caller's (caller), or the
// call's own deadline or its run's end (ctx).
func abandoned(caller, ctx context.Context, run *Run, name string, timeout time.Duration) outcome {
	const left = "its work is left to finish in the background (counted in berth_stuck_calls)"
	o := outcome{abandoned: true}
	switch {
	case caller.Err() != nil:
		o.res = Errorf("%s was cancelled and did not stop when asked; %s", name, left).Classed(errclass.ErrCanceled)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		o.res = Errorf("%s timed out after %s and did not stop when asked; %s. Do not repeat the call as it was: check what it was given (a path that names a FIFO or a device, an input that never ends)", name, timeout, left).Classed(errclass.ErrTimeout)
	default: // the run ended
		_, why := run.Ended()
		o.res = Errorf("%s did not stop when its run ended (%s); %s", name, why, left).Classed(ErrRunEnded)
	}
	return o
}

func (g *Registry) unknownTool(run *Run, s Surface, name string) *Result {
	g.mu.Lock()
	ps := append([]Provider(nil), g.providers...)
	g.mu.Unlock()
	for _, p := range ps {
		if run.Feature(p.Feature()) {
			continue
		}
		for _, t := range p.Tools(run) {
			if t.Spec().Name == name {
				return Errorf("tool %s is not available for this run: its feature %q is off (turn it on with run/start or run/update)", name, p.Feature()).Classed(errclass.ErrInvalid)
			}
		}
	}
	var names []string
	for _, sp := range g.List(run, s) {
		names = append(names, sp.Name)
	}
	return Errorf("unknown tool %q: this run offers %s", name, strings.Join(names, ", ")).Classed(errclass.ErrNotFound)
}

func (g *Registry) schema(spec Spec) (*inputSchema, error) {
	g.mu.Lock()
	c, ok := g.schemas[spec.Name]
	g.mu.Unlock()
	if ok && bytes.Equal(c.text, spec.InputSchema) {
		return c.schema, nil
	}
	s, err := compileSchema(spec.Name, spec.Schema())
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.schemas[spec.Name] = compiled{text: bytes.Clone(spec.InputSchema), schema: s}
	g.mu.Unlock()
	return s, nil
}

// compiled is a tool's input schema as text and compiled; a spec whose
// text changed (a provider that builds it from configuration) is
// compiled again.
type compiled struct {
	text   []byte
	schema *inputSchema
}

func (g *Registry) count(tool, tier, outcome string) {
	g.metrics.ToolCalls.WithLabelValues(tool, tier, outcome).Inc()
}
