package kernel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

const evalDescription = `Run Python or JavaScript in a persistent kernel of this run: variables, imports and loaded data survive between calls, as in a notebook.
Pass code (the cell), description (5-10 words saying what the cell does, shown in the transcript), optionally language ("python", the default, or "javascript") and reset (true discards the kernel and starts clean first).
Returns printed output (long output keeps its head and tail and says what was cut), then each display and the value of the last expression (also bound to _): a pandas DataFrame or Series as a table, matplotlib figures as PNG images, rich objects as HTML, Markdown or JSON text. An exception returns its traceback as an error.
Python accepts the IPython idioms %pip, %cd, !cmd, x = !cmd, %%bash, %timeit and %%timeit, and from IPython.display import display, HTML, Markdown, Image even without IPython installed; the working directory's .venv is used when there is one. tool(name, args) calls one of your own tools from the cell and returns its text (raises ToolError if refused); in JavaScript it is await tool(name, args), and top-level await works.
A cell silent for longer than the idle budget (pending tool() calls do not count) is interrupted, then its kernel killed if it does not stop; a kernel that dies loses its state and the next call starts a fresh one.`

const evalSchema = `{
  "type": "object",
  "properties": {
    "code": {"type": "string", "description": "The cell to run."},
    "description": {"type": "string", "pattern": "` + descriptionPattern + `", "description": "5-10 words saying what the cell does, for the transcript label, e.g. \"load the sales data and plot monthly totals\"."},
    "language": {"type": "string", "enum": ["python", "javascript"], "description": "python (default) or javascript."},
    "reset": {"type": "boolean", "description": "Discard this language's kernel and start clean before running the cell."}
  },
  "required": ["code", "description"],
  "additionalProperties": false
}`

// descriptionPattern is the description rule (5 to 10 words) as the
// schema states it, so the model sees the rule before it calls; Call
// checks the same with strings.Fields, for a caller that skipped the
// schema. Words are runs of non-space; JSON escapes the backslashes.
const descriptionPattern = `^\\s*\\S+(\\s+\\S+){4,9}\\s*$`

type evalArgs struct {
	Code        string `json:"code"`
	Description string `json:"description"`
	Language    string `json:"language"`
	Reset       bool   `json:"reset"`
}

// killGrace is the time a killed kernel's cell takes to be reported, on
// top of kernels.interrupt_grace.
const killGrace = 5 * time.Second

// evalTool is the eval tool; its kernels live in each run's Value.
type evalTool struct {
	cfg Config
	m   *metrics.Metrics
}

// Spec: exec tier, not parallel-safe (a kernel runs one cell at a time),
// bounded by kernels.cell_timeout. Past it the cell is interrupted, and
// killed after kernels.interrupt_grace: the call waits for that, so the
// model reads what the cell printed and what became of its kernel.
func (t *evalTool) Spec() orchestrator.Spec {
	return orchestrator.Spec{
		Name:         "eval",
		Tier:         orchestrator.Exec,
		Description:  evalDescription,
		InputSchema:  json.RawMessage(evalSchema),
		ParallelSafe: false,
		Timeout:      t.cfg.CellTimeout,
		CancelGrace:  t.cfg.InterruptGrace + killGrace,
	}
}

// Call checks the arguments, resets when asked, runs the cell on the
// run's kernel for the language (starting one if needed) and turns what
// came back into a result.
func (t *evalTool) Call(ctx context.Context, run *orchestrator.Run, raw json.RawMessage) (*orchestrator.Result, error) {
	var a evalArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return orchestrator.Errorf("eval arguments could not be read: %v. Pass code and description as strings.", err), nil
	}
	if n := len(strings.Fields(a.Description)); n < 5 || n > 10 {
		return orchestrator.Errorf("description must be 5 to 10 words (it labels the cell in the transcript); got %d: %q. Say what the cell does, for example \"load the sales data and plot monthly totals\".", n, a.Description), nil
	}
	lang := a.Language
	if lang == "" {
		lang = Python
	}
	ks := kernelsOf(run, t.cfg, t.m)
	if a.Reset {
		ks.discard(lang, nil, metrics.ReasonStopped)
	}
	if strings.TrimSpace(a.Code) == "" {
		if a.Reset {
			return orchestrator.Textf("The %s kernel was reset; the next cell starts a fresh one.", lang), nil
		}
		return orchestrator.Errorf("code is empty: pass the cell to run (or reset: true with empty code to only discard the %s kernel).", lang), nil
	}

	k, lost, err := ks.acquire(ctx, run, lang)
	if errors.Is(err, orchestrator.ErrRunEnded) {
		return nil, fmt.Errorf("run %s ended while eval was starting its kernel: %w", run.ID, err)
	}
	if err != nil {
		var died string
		if lost != "" {
			died = fmt.Sprintf(" The previous one had died since the last cell (%s): its state is lost.", lost)
		}
		if errors.Is(err, enclosure.ErrGone) || errors.Is(err, enclosure.ErrUnavailable) {
			// The container or its engine, not the interpreter: its
			// error says what to do.
			return orchestrator.Errorf("The %s kernel could not start: %s.%s", lang, enclosure.Say(err), died), nil
		}
		return orchestrator.Errorf("The %s kernel could not start: %v. Check the interpreter (kernels.%s in the configuration, or the working directory's .venv) and call again.%s", lang, err, interpKey(lang), died), nil
	}
	c := k.execute(ctx, t.cfg, run, newCellID(), a.Code)
	if ended, _ := run.Ended(); ended && c.end != endDone {
		// The run's end killed the kernel: that, not a crash, is what
		// happened to the cell.
		return nil, fmt.Errorf("run %s ended while its eval cell ran: %w", run.ID, orchestrator.ErrRunEnded)
	}
	var notes []string
	if lost != "" {
		notes = append(notes, fmt.Sprintf("The previous %s kernel had died since the last cell (%s), so this cell ran in a fresh one: earlier variables and imports are gone.", lang, lost))
	}
	res := c.out.result(append(notes, t.settle(ks, lang, c))...)
	if c.end != endDone {
		// A cell that hung or whose kernel died in a paused, stopped or
		// removed container: the container is the cause, and its error
		// says what to do (issue 24 item 11); what became of the kernel
		// follows.
		if down := enclosure.Check(ctx, run.Enclosure); down != nil {
			res.IsError = true
			res.Content = append([]orchestrator.Block{orchestrator.TextBlock(fmt.Sprintf("The cell could not finish: %s.", enclosure.Say(down)))}, res.Content...)
		}
	}
	return res, nil
}

// settle keeps or discards the kernel after a cell and says what became
// of it when the cell did not simply finish.
func (t *evalTool) settle(ks *kernels, lang string, c *cellRun) string {
	switch c.end {
	case endInterrupted:
		t.m.CellInterrupted(metrics.InterruptInterrupted)
		ks.release(lang, c.k)
		c.out.failed = true
		return fmt.Sprintf("The cell was interrupted (%s); the %s kernel and its state are intact.", c.reason(), lang)
	case endKilled:
		t.m.CellInterrupted(metrics.InterruptKilled)
		ks.discard(lang, c.k, metrics.ReasonStopped)
		c.out.failed = true
		return fmt.Sprintf("The cell was interrupted (%s) and did not stop within %s, so the %s kernel was killed: its state (variables, imports) is lost, and the next call starts a fresh kernel.", c.reason(), t.cfg.InterruptGrace, lang)
	case endDied:
		ks.discard(lang, c.k, c.k.diedReason())
		c.out.failed = true
		note := fmt.Sprintf("The %s kernel died during this cell (%s): its state (variables, imports) is lost, and the next call starts a fresh kernel.", lang, c.died)
		if tail := strings.TrimSpace(c.k.stderr.String()); tail != "" {
			note += "\nIts last words on stderr:\n" + capString(tail, 2000)
		}
		return note
	}
	ks.release(lang, c.k)
	return ""
}

// reason says why a cell was interrupted.
func (c *cellRun) reason() string {
	switch c.why {
	case "budget":
		return fmt.Sprintf("no output for %s, the cell idle budget; pending tool() calls do not count against it", c.cfg.CellIdleBudget)
	case "timeout":
		return fmt.Sprintf("the call's deadline passed; kernels.cell_timeout is %s", c.cfg.CellTimeout)
	}
	return "the call was cancelled"
}

// interpKey is the configuration key of lang's interpreter.
func interpKey(lang string) string {
	if lang == JavaScript {
		return "node"
	}
	return "python"
}

// newCellID names a cell in frames and tracebacks.
func newCellID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
