package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"go.lsp.dev/jsonrpc2"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/internal/errclass"
	"github.com/berth-dev/berth/orchestrator"
)

// session is one connection's side of the protocol. It is the Owner of the
// runs the connection starts, so no other connection can reach them.
type session struct {
	srv  *Server
	peer *peer
}

// handle dispatches one request of the harness.
func (s *session) handle(ctx context.Context, req *jsonrpc2.Request) (any, error) {
	switch req.Method() {
	case "initialize":
		return s.initialize(req)
	case "run/start":
		return s.startRun(ctx, req)
	case "run/update":
		return s.updateRun(req)
	case "run/stop":
		return s.stopRun(req)
	case "tools/list":
		return s.listTools(req)
	case "tools/call":
		return s.callTool(ctx, req)
	case "files/willWrite":
		return s.willWrite(ctx, req)
	case "files/didWrite":
		return s.didWrite(ctx, req)
	}
	if !req.IsCall() && strings.HasPrefix(req.Method(), "$/") {
		// Optional notifications may be ignored (as in LSP).
		return nil, nil
	}
	return nil, Errorf(CodeMethodNotFound, "method not found: %q; Berth serves initialize, run/start, run/update, run/stop, tools/list, tools/call, files/willWrite, files/didWrite and $/cancelRequest", req.Method())
}

func (s *session) initialize(req *jsonrpc2.Request) (any, error) {
	var p InitializeParams
	if err := decodeParams(req.Method(), req.Params(), &p); err != nil {
		return nil, err
	}
	f := s.srv.Registry.Features()
	if f == nil {
		f = []string{}
	}
	return InitializeResult{Server: ClientInfo{Name: "berth", Version: s.srv.Version}, ProtocolVersion: ProtocolVersion, Features: f}, nil
}

func (s *session) startRun(ctx context.Context, req *jsonrpc2.Request) (any, error) {
	var p StartRunParams
	if err := decodeParams(req.Method(), req.Params(), &p); err != nil {
		return nil, err
	}
	var spec enclosure.Spec
	if p.Enclosure != nil {
		spec = enclosure.Spec(*p.Enclosure)
	}
	run, err := s.srv.Runs.Start(ctx, orchestrator.StartParams{
		RunID: p.RunID, ConversationID: p.ConversationID, Workdir: p.Workdir, Enclosure: spec,
		Features: p.Features, Owner: s,
		NewHarness: func(id string) orchestrator.Harness { return &runHarness{peer: s.peer, runID: id} },
	})
	if err != nil {
		return nil, toError(err)
	}
	return StartRunResult{
		RunID:     run.ID,
		Enclosure: enclosure.Spec{Driver: run.Enclosure.Driver(), ID: run.Enclosure.ID()},
		Features:  nonNil(run.Features()),
		Resumed:   run.Resumed,
	}, nil
}

func (s *session) updateRun(req *jsonrpc2.Request) (any, error) {
	var p UpdateRunParams
	if err := decodeParams(req.Method(), req.Params(), &p); err != nil {
		return nil, err
	}
	if err := orchestrator.CheckFeatures(p.Features); err != nil {
		return nil, toError(err)
	}
	run, err := s.srv.Runs.Get(p.RunID, s)
	if err != nil {
		return nil, toError(err)
	}
	run.SetFeatures(p.Features)
	return struct{}{}, nil
}

func (s *session) stopRun(req *jsonrpc2.Request) (any, error) {
	var p RunParams
	if err := decodeParams(req.Method(), req.Params(), &p); err != nil {
		return nil, err
	}
	if err := s.srv.Runs.Stop(p.RunID, s); err != nil {
		return nil, toError(err)
	}
	return struct{}{}, nil
}

func (s *session) listTools(req *jsonrpc2.Request) (any, error) {
	var p ListToolsParams
	if err := decodeParams(req.Method(), req.Params(), &p); err != nil {
		return nil, err
	}
	run, surface, err := s.runOn(req.Method(), p.RunID, p.Surface)
	if err != nil {
		return nil, err
	}
	out := ListToolsResult{Tools: []ToolInfo{}}
	for _, sp := range s.srv.Registry.List(run, surface) {
		out.Tools = append(out.Tools, NewToolInfo(sp))
	}
	return out, nil
}

func (s *session) callTool(ctx context.Context, req *jsonrpc2.Request) (res any, err error) {
	var p CallToolParams
	if err := decodeParams(req.Method(), req.Params(), &p); err != nil {
		return nil, err
	}
	run, surface, err := s.runOn(req.Method(), p.RunID, p.Surface)
	if err != nil {
		return nil, err
	}
	tier, known := s.srv.Registry.Tier(run, p.Name)
	if !known {
		tier = orchestrator.Exec // an unknown tool is refused anyway: never run again
	}
	if p.CallID != "" {
		answer, err, end := s.srv.journal().begin(run.ID, p.CallID, p.Name, tier, p.Arguments)
		if end == nil {
			return answer, err
		}
		defer func() { end(res, err, ctx.Err() != nil) }()
	}
	out, err := s.srv.Registry.Call(ctx, run, surface, p.Name, p.Arguments)
	switch {
	case cut(ctx) && tier == orchestrator.Read:
		return nil, failf(errclass.ErrRestarting, "Berth handed off to a new Berth while tools/call %s ran, and cut it off: it is a read, safe to send again once Berth answers", p.Name)
	case cut(ctx):
		return nil, failf(errclass.ErrOutcomeUnknown, "Berth handed off to a new Berth while tools/call %s ran, and cut it off at runs.handoff_timeout: its result is unknown. It may or may not have taken effect: look at what it would have changed before you send it again", p.Name)
	case ctx.Err() != nil:
		// The harness cancelled the call (or went away): whatever the tool
		// returned, the answer is that it was cancelled.
		return nil, failf(errclass.ErrCanceled, "tools/call %s was cancelled by the harness", p.Name)
	case err != nil:
		return nil, toError(err)
	}
	return out, nil
}

// runOn checks a request's surface and finds its run, which this
// connection must own.
func (s *session) runOn(method, runID, surface string) (*orchestrator.Run, orchestrator.Surface, error) {
	sf, err := orchestrator.ParseSurface(surface)
	if err != nil {
		return nil, "", failf(errclass.ErrInvalid, "invalid params for %s: field \"surface\": %v", method, err)
	}
	run, err := s.srv.Runs.Get(runID, s)
	if err != nil {
		return nil, "", toError(err)
	}
	return run, sf, nil
}

func (s *session) willWrite(ctx context.Context, req *jsonrpc2.Request) (any, error) {
	w, err := s.writeTarget(req)
	if err != nil {
		return nil, err
	}
	if w.observer != nil {
		if err := w.observer.WillWrite(ctx, w.run, w.paths); err != nil {
			return nil, toError(err)
		}
	}
	return struct{}{}, nil
}

func (s *session) didWrite(ctx context.Context, req *jsonrpc2.Request) (any, error) {
	w, err := s.writeTarget(req)
	if err != nil {
		return nil, err
	}
	if w.observer == nil {
		return &orchestrator.WriteReport{Diagnostics: []orchestrator.Diagnostic{}, Text: w.why, State: orchestrator.WriteUnknown}, nil
	}
	rep, err := w.observer.DidWrite(ctx, w.run, w.paths)
	if err != nil {
		return nil, toError(err)
	}
	if rep == nil {
		// Silence is never clean.
		rep = &orchestrator.WriteReport{Text: "diagnostics unknown: the language-server side gave no report", State: orchestrator.WriteUnknown}
	}
	if rep.Diagnostics == nil {
		rep.Diagnostics = []orchestrator.Diagnostic{}
	}
	return rep, nil
}

// writeTarget is a checked files/* request and who hears it.
type writeTarget struct {
	run      *orchestrator.Run
	paths    []string
	observer orchestrator.WriteObserver // nil: nobody; why says so
	why      string
}

// writeTarget checks a files/* request and finds who hears it: the
// registry's write observer when the run's lsp feature is on, or nobody,
// with the reason diagnostics are unknown.
func (s *session) writeTarget(req *jsonrpc2.Request) (*writeTarget, error) {
	var p WriteParams
	if err := decodeParams(req.Method(), req.Params(), &p); err != nil {
		return nil, err
	}
	run, err := s.srv.Runs.Get(p.RunID, s)
	if err != nil {
		return nil, toError(err)
	}
	w := &writeTarget{run: run, paths: p.Paths, observer: s.srv.Registry.WriteObserver()}
	switch {
	case w.observer == nil:
		w.why = "diagnostics unknown: this Berth has no language-server support built in, so the write was not checked"
	case !run.Feature(orchestrator.FeatureLSP):
		w.observer = nil
		w.why = "diagnostics unknown: the run's lsp feature is off (run/start features.lsp=false), so the write was not checked"
	}
	return w, nil
}

// runHarness is the orchestrator.Harness of one run: reverse requests on
// the connection that started it.
type runHarness struct {
	peer  *peer
	runID string
}

var _ orchestrator.Harness = (*runHarness)(nil)

func (h *runHarness) CallTool(ctx context.Context, call orchestrator.ToolCall) (json.RawMessage, error) {
	var res json.RawMessage
	err := h.peer.Call(ctx, "harness/callTool", HarnessCallToolParams{RunID: h.runID, Name: call.Name, Arguments: orchestrator.ArgsOrEmpty(call.Arguments), Origin: call.Origin}, &res)
	if err != nil {
		return nil, harnessError("harness/callTool", err)
	}
	if err := checkToolResult(res); err != nil {
		return nil, fmt.Errorf("the harness answered harness/callTool with %v; it must answer with a tool result {content: [blocks], isError}", err)
	}
	if !utf8.Valid(res) {
		// Bytes that are not UTF-8 can only be inside strings: made
		// U+FFFD, as decoding would, so a kernel can read the text.
		res = bytes.ToValidUTF8(res, []byte("\uFFFD"))
	}
	return res, nil
}

// checkToolResult says what keeps a harness's answer from being a tool
// result that a kernel's tool() can read without decoding it here: JSON
// (the library passes a result on unread), an object whose content, if
// any, is an array of objects and whose isError, if any, is a boolean.
// null is an empty result.
func checkToolResult(raw json.RawMessage) error {
	var r struct {
		Content []json.RawMessage `json:"content"`
		IsError *bool             `json:"isError"`
	}
	var te *json.UnmarshalTypeError
	switch err := json.Unmarshal(raw, &r); {
	case errors.As(err, &te) && te.Field == "":
		return fmt.Errorf("%s %s", article(te.Value), te.Value)
	case errors.As(err, &te):
		return fmt.Errorf("%q that is %s %s", te.Field, article(te.Value), te.Value)
	case err != nil:
		return fmt.Errorf("a result that is not valid JSON (%v)", err)
	}
	for _, b := range r.Content {
		if k := kindOf(b); k != "object" {
			return fmt.Errorf(`%s %s among the "content" blocks`, article(k), k)
		}
	}
	return nil
}

func (h *runHarness) Ask(ctx context.Context, q orchestrator.Question) (*orchestrator.Answer, error) {
	var a orchestrator.Answer
	err := h.peer.Call(ctx, "harness/ask", AskParams{RunID: h.runID, Card: q, TimeoutSeconds: q.Timeout.Seconds()}, &a)
	if err != nil {
		return nil, harnessError("harness/ask", err)
	}
	return &a, nil
}

// harnessError keeps the harness's own message (an *Error) as it is and
// says plainly when the connection is gone.
func harnessError(method string, err error) error {
	if errors.Is(err, ErrClosed) {
		return fmt.Errorf("the harness connection closed before %s was answered: %w", method, err)
	}
	return err
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
