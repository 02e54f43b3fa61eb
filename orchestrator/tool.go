package orchestrator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Tier is what a tool may do. The tier decides which surfaces see a tool,
// not only whether it asks for approval.
type Tier int

const (
	// Read tools have no side effects.
	Read Tier = iota
	// Write tools change files.
	Write
	// Exec tools start or control a process.
	Exec
)

func (t Tier) String() string {
	switch t {
	case Read:
		return "read"
	case Write:
		return "write"
	case Exec:
		return "exec"
	}
	return fmt.Sprintf("tier(%d)", int(t))
}

// MarshalJSON writes the tier's name.
func (t Tier) MarshalJSON() ([]byte, error) { return json.Marshal(t.String()) }

// Surface is who is asking: the full agent, plan mode, or a read-only
// subagent.
type Surface string

const (
	SurfaceFull     Surface = "full"
	SurfacePlan     Surface = "plan"
	SurfaceReadonly Surface = "readonly"
)

// ParseSurface accepts "full", "plan" and "readonly"; empty means full.
func ParseSurface(s string) (Surface, error) {
	switch Surface(s) {
	case "", SurfaceFull:
		return SurfaceFull, nil
	case SurfacePlan, SurfaceReadonly:
		return Surface(s), nil
	}
	return "", fmt.Errorf("unknown surface %q: use \"full\", \"plan\" or \"readonly\"", s)
}

type surfaceKey struct{}

// withSurface is ctx carrying the surface of the tool call it bounds.
func withSurface(ctx context.Context, s Surface) context.Context {
	return context.WithValue(ctx, surfaceKey{}, s)
}

// SurfaceOf is the surface of the tool call ctx bounds, which the registry
// puts in the context it gives the tool: a tool that starts an agent of
// its own (a vibe worker) tells it, so that the agent's tools can keep to
// it. It is SurfaceFull for a context of no call.
func SurfaceOf(ctx context.Context) Surface {
	if s, ok := ctx.Value(surfaceKey{}).(Surface); ok {
		return s
	}
	return SurfaceFull
}

// MaxTier is the highest tier the surface may see and call.
func (s Surface) MaxTier() Tier {
	if s == SurfaceFull {
		return Exec
	}
	return Read
}

// Spec describes a tool to the model and to dispatch.
type Spec struct {
	Name        string
	Tier        Tier
	Description string          // what the model reads: what to pass, what comes back
	InputSchema json.RawMessage // JSON Schema of the arguments
	// ParallelSafe is false for tools whose calls on one run must not
	// overlap (debug, eval): dispatch serialises them per run and tool.
	ParallelSafe bool
	// Timeout bounds one call; zero means the registry's default.
	Timeout time.Duration
	// CancelGrace is how long the tool has, once its call is cancelled,
	// past Timeout or its run has ended, to return its own answer (what
	// a cell printed before it was interrupted) before the call is
	// answered without it; zero means DefaultCancelGrace.
	CancelGrace time.Duration
}

// NoArgs is the input schema of a tool that takes no arguments.
const NoArgs = `{"type":"object","properties":{},"additionalProperties":false}`

// Schema is the input schema tools/list shows and the registry checks
// arguments against: InputSchema, or any object for a tool that declares
// none.
func (sp Spec) Schema() json.RawMessage {
	if len(sp.InputSchema) == 0 {
		return json.RawMessage(`{"type":"object"}`)
	}
	return sp.InputSchema
}

// ArgsOrEmpty is a call's arguments as a tool receives them: none
// (absent, blank or null) is the empty object, so every tool decodes an
// object.
func ArgsOrEmpty(args json.RawMessage) json.RawMessage {
	if t := bytes.TrimSpace(args); len(t) == 0 || string(t) == "null" {
		return json.RawMessage("{}")
	}
	return args
}

// Tool is one callable tool, bound to a run by its Provider.
type Tool interface {
	Spec() Spec
	// Call runs the tool. A problem the model can act on is a Result with
	// IsError set and a sentence that says what to do next; a Go error is
	// for broken infrastructure.
	Call(ctx context.Context, run *Run, args json.RawMessage) (*Result, error)
}

// Provider offers its tools for a run only while its feature is connected
// for that run. Tools may return nil when the run lacks what the provider
// needs (debug without a conversation id).
type Provider interface {
	Feature() string
	Tools(run *Run) []Tool
}

// RunStarter is a Provider that begins work for a run as soon as the run
// starts, in the background (lsp starts the run's language servers):
// RunStarted is called only when the provider's feature is on for the
// run, must return at once, and the work must end with the run.
type RunStarter interface {
	RunStarted(run *Run)
}

// Shutdowner is a Provider that keeps resources beyond the runs that made
// them (lsp's parked language servers): Shutdown ends them all, once
// Berth has ended every run and before it exits.
type Shutdowner interface {
	Shutdown()
}

// Features named by DESIGN.md. The first four are Berth's own and on unless
// run/start turns them off; questions and vibe are off unless the harness
// turns them on.
const (
	FeatureLSP        = "lsp"
	FeatureStructural = "structural"
	FeatureDebug      = "debug"
	FeatureKernels    = "kernels"
	FeatureQuestions  = "questions"
	FeatureVibe       = "vibe"
)

// DefaultFeatures is the feature set of a run that named none.
func DefaultFeatures() map[string]bool {
	return map[string]bool{
		FeatureLSP: true, FeatureStructural: true, FeatureDebug: true, FeatureKernels: true,
		FeatureQuestions: false, FeatureVibe: false,
	}
}

// CheckFeatures refuses a feature name Berth does not know (run/start,
// run/update), naming the known ones.
func CheckFeatures(f map[string]bool) error {
	known := DefaultFeatures()
	for k := range f {
		if _, ok := known[k]; !ok {
			names := make([]string, 0, len(known))
			for n := range known {
				names = append(names, n)
			}
			sort.Strings(names)
			return fmt.Errorf("unknown feature %q in features: known features are %s: %w", k, strings.Join(names, ", "), ErrInvalid)
		}
	}
	return nil
}
