package rpc

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/berth-dev/berth/internal/errclass"
)

// errHandoffCut is the cause of the contexts of the requests a handoff
// cut off at its bound.
var errHandoffCut = errors.New("Berth handed off to a new Berth and cut the request off at runs.handoff_timeout")

// handoff is a Server's orderly upgrade (issue 29 item 4): once it
// started, every new request is refused with the retryable restarting
// error; the requests in flight are waited for up to a bound, and the
// rest are cut off.
type handoff struct {
	started atomic.Bool
	// inFlight counts the requests being handled, in every connection.
	inFlight atomic.Int64

	once   sync.Once
	ctx    context.Context // ends when the requests in flight are cut off
	cancel context.CancelCauseFunc
}

func (h *handoff) init() {
	h.once.Do(func() { h.ctx, h.cancel = context.WithCancelCause(context.Background()) })
}

// guard wraps a connection's handler: a request that comes once the
// handoff started is refused (restarting), and every other is counted
// while it runs, with a context the handoff's cut ends.
func (h *handoff) guard(next handlerFunc) handlerFunc {
	h.init()
	return func(ctx context.Context, req *jsonrpc2.Request) (any, error) {
		if !req.IsCall() {
			return next(ctx, req)
		}
		h.inFlight.Add(1)
		defer h.inFlight.Add(-1)
		if h.started.Load() {
			return nil, failf(errclass.ErrRestarting, "Berth is handing off to a new Berth (an upgrade or a restart) and takes no new work: %s was not run; send it again once Berth answers, on a new connection, with the same runId (run/start resumes the run)", req.Method())
		}
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		stop := context.AfterFunc(h.ctx, func() { cancel(context.Cause(h.ctx)) })
		defer stop()
		res, err := next(ctx, req)
		if err != nil && errors.Is(context.Cause(ctx), errHandoffCut) {
			var e *Error
			if !errors.As(err, &e) || e.Code == CodeRequestCancelled {
				err = failf(errclass.ErrRestarting, "Berth handed off to a new Berth while %s ran, and cut it off: send it again once Berth answers, on a new connection", req.Method())
			}
		}
		return res, err
	}
}

// cut reports whether ctx, a request's, was cut off by a handoff.
func cut(ctx context.Context) bool { return errors.Is(context.Cause(ctx), errHandoffCut) }

// HandOff stops the server taking work, for a handoff to a new Berth:
// from now on each request is refused with the retryable restarting
// error (-32007); the requests in flight are waited for up to bound, and
// those still running then are cut off (a tools/call with an error
// saying its result is unknown, unless its tool is of the read tier;
// anything else with restarting). It returns how many were cut off. The
// caller then closes the connections (Close) and exits without ending
// the runs, whose kept processes their relays hold.
func (s *Server) HandOff(bound time.Duration) (cutOff int) {
	h := &s.handoff
	h.init()
	h.started.Store(true)
	deadline := time.Now().Add(bound)
	for h.inFlight.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	// The library writes a reply just after its handler returned: give
	// the last ones the moment they take before the connections close.
	defer time.Sleep(100 * time.Millisecond)
	n := h.inFlight.Load()
	if n == 0 {
		return 0
	}
	h.cancel(errHandoffCut)
	// A cut call is answered within its tool's short grace.
	for end := time.Now().Add(5 * time.Second); h.inFlight.Load() > 0 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	return int(n)
}

// HandingOff says whether HandOff started.
func (s *Server) HandingOff() bool { return s.handoff.started.Load() }
