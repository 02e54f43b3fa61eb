package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/berth-dev/berth/bridge"
	"github.com/berth-dev/berth/orchestrator"
)

// How a cell ended, beyond its own status.
const (
	endDone        = iota // the driver sent done
	endInterrupted        // interrupted, and done arrived within the grace
	endKilled             // interrupted, no done within the grace: killed
	endDied               // the kernel died on its own
)

// cellRun is one cell in flight: the budget, the pending tool() calls,
// and what has come back so far.
type cellRun struct {
	k    *kernel
	cfg  Config
	run  *orchestrator.Run
	id   string
	out  *output
	why  string // why it was interrupted: "budget", "cancelled" or "timeout"
	end  int
	died string // how the kernel ended, when it did
}

// execute runs one cell and returns when the driver says it is done, or
// the kernel was killed or died. ctx is the caller's: when it ends the
// cell is interrupted like a cell past its budget.
func (k *kernel) execute(ctx context.Context, cfg Config, run *orchestrator.Run, id, code string) *cellRun {
	c := &cellRun{k: k, cfg: cfg, run: run, id: id, out: newOutput(cfg)}
	// The cell is written while the loop below reads: node reads its input
	// on the thread that writes its output, so a kernel blocked writing
	// output printed between cells takes a large cell only once Berth
	// reads that output. A kernel that is killed fails the write.
	wrote := make(chan error, 1)
	go func() { wrote <- k.w.Write(bridge.Frame{Type: bridge.TypeExecute, Cell: id, Code: code}) }()

	callCtx, cancelCalls := context.WithCancel(ctx)
	defer cancelCalls()
	loopDone := make(chan struct{})
	defer close(loopDone)
	callDone := make(chan struct{})
	pending := 0

	budget := time.NewTimer(cfg.CellIdleBudget)
	defer budget.Stop()
	rearm := func() {
		budget.Stop()
		if pending == 0 {
			budget.Reset(cfg.CellIdleBudget)
		}
	}
	var grace <-chan time.Time
	cancelled := ctx.Done()

	for {
		select {
		case err := <-wrote:
			wrote = nil
			if err != nil {
				c.end, c.died = endDied, k.exitDescription()
				return c
			}
		case f, ok := <-k.frames:
			if !ok {
				c.end, c.died = endDied, k.exitDescription()
				return c
			}
			switch f.Type {
			case bridge.TypeToolCall:
				pending++
				rearm()
				go c.serveCall(callCtx, f, callDone, loopDone)
				continue
			case bridge.TypeError, bridge.TypeResult:
				if f.Cell != id && k.inherited {
					// The error or value of the cell that ran when
					// Berth went away: said, not taken for this cell's.
					c.out.addInherited(f)
					rearm()
					continue
				}
			case bridge.TypeDone:
				if f.Cell != id {
					// A late done of a cell given up on, or of the one
					// a resumed kernel ran when Berth went away.
					k.inherited = false
					continue
				}
				// An interrupt that came as the cell finished on its own
				// changed nothing: report the cell as it ended.
				if c.why != "" && f.Status != bridge.StatusOK {
					c.end = endInterrupted
				}
				// The status decides even if the error frame was lost (torn
				// by a stray write beside it).
				if f.Status != bridge.StatusOK {
					c.out.failed = true
				}
				return c
			}
			c.out.add(f, id)
			rearm()
		case <-callDone:
			pending--
			rearm()
		case <-budget.C:
			c.interrupt("budget", &grace)
		case <-cancelled:
			cancelled = nil
			why := "cancelled"
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				why = "timeout"
			}
			c.interrupt(why, &grace)
		case <-grace:
			c.end = endKilled
			return c
		}
	}
}

// interrupt sends SIGINT (KeyboardInterrupt in Python) to the kernel's
// process group, or an interrupt frame where the enclosure cannot signal,
// and starts the grace period after which the kernel is killed.
func (c *cellRun) interrupt(why string, grace *<-chan time.Time) {
	if c.why != "" {
		return
	}
	c.why = why
	var sig os.Signal = syscall.SIGINT
	if err := c.k.proc.Signal(sig); err != nil {
		_ = c.k.w.Write(bridge.Frame{Type: bridge.TypeInterrupt, Cell: c.id})
	}
	*grace = time.After(c.cfg.InterruptGrace)
}

// serveCall answers one tool() call through the run's harness, with the
// cell as its origin, and writes the answer (or refusal) back.
func (c *cellRun) serveCall(ctx context.Context, f bridge.Frame, callDone chan<- struct{}, loopDone <-chan struct{}) {
	reply := bridge.Frame{Type: bridge.TypeToolResult, ID: f.ID}
	if h := c.run.Harness; f.Cell != c.id {
		// Made by a cell that had ended (a thread or timer it left behind
		// called tool() after its done): not this cell's call, so it is not
		// held until this one ends.
		reply.Error = "the call was abandoned: the cell that made it had ended; await tool() within its cell"
	} else if h == nil {
		reply.Error = "no harness connection owns this run, so tool() cannot reach any tool; do the work in the cell, or call the tool directly"
	} else {
		// In flight while the harness has it; counted down before the
		// answer goes back, so the cell cannot end with it still counted.
		done := c.k.m.BridgeCall()
		res, err := callHarness(ctx, h, orchestrator.ToolCall{
			Name: f.Name, Arguments: f.Arguments,
			Origin: orchestrator.Origin{Tool: "eval", Cell: f.Cell},
		})
		done()
		switch {
		case err != nil && ctx.Err() != nil:
			reply.Error = fmt.Sprintf("the call was abandoned (%v): the cell that made it ended, was interrupted or its eval call was cancelled first; await tool() within its cell", err)
		case err != nil:
			reply.Error = err.Error()
		case len(res) == 0 || string(res) == "null":
			reply.Result = json.RawMessage(`{"content":[],"isError":false}`)
		default:
			// The harness's JSON as it came: nothing to decode here.
			reply.Result = res
		}
	}
	_ = c.k.w.Write(reply)
	select {
	case callDone <- struct{}{}:
	case <-loopDone:
	}
}

// callHarness is h.CallTool on this goroutine, where a panic would take
// the whole process down: it becomes the call's error instead.
func callHarness(ctx context.Context, h orchestrator.Harness, call orchestrator.ToolCall) (res json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, fmt.Errorf("the harness connection failed internally (%v)", p)
		}
	}()
	return h.CallTool(ctx, call)
}
