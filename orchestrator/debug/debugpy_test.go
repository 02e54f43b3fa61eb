package debug

import "testing"

// TestDebugpyTranscript drives a real debugpy (Debian's, under
// /usr/bin/python3) through a whole session.
func TestDebugpyTranscript(t *testing.T) {
	e := newEnv(t, "python", nil)
	e.ok(`{"operation":"breakpoints","file":"app.py","lines":[13]}`, "stored 1 breakpoint", "app.py:13", "13 | total = square(7)")
	e.ok(`{"operation":"launch","program":"app.py","args":[]}`,
		"launched app.py with debugpy", "app.py:13 verified", "stopped (breakpoint)", "app.py:13 in main", "13 | total = square(7)")
	e.ok(`{"operation":"status"}`, "session: debugpy debugging app.py", "app.py:13 in main")
	e.ok(`{"operation":"threads"}`, "thread_id 1")

	st := e.ok(`{"operation":"stack"}`, "#0 frame_id", "app.py:13 in main", "app.py:20 in <module>")
	frame := after(t, st, "frame_id ")
	sc := e.ok(`{"operation":"scopes","frame_id":`+frame+`}`, "Locals: reference")
	locals := e.ok(`{"operation":"variables","reference":`+after(t, sc, "Locals: reference ")+`}`,
		"name (str) = 'berth'", "(cut: showing 400 of 10002 characters)")
	e.ok(`{"operation":"variables","reference":`+reference(t, locals, "items ")+`}`, "(showing 50 of", "000 (int) = 0", "047 (int) = 47")

	e.ok(`{"operation":"step_in"}`, "stopped (step)", "app.py:5 in square", "5 | result = n * n")
	// evaluate runs in the frame it is given: the caller's sees name, not n.
	inner := e.ok(`{"operation":"stack"}`, "#0 frame_id", "app.py:5 in square", "#1 frame_id", "app.py:13 in main")
	e.ok(`{"operation":"evaluate","expression":"name","frame_id":`+after(t, inner, "#1 frame_id ")+`}`, "'berth' (str)")
	e.fails(`{"operation":"evaluate","expression":"n","frame_id":`+after(t, inner, "#1 frame_id ")+`}`, "evaluate", "'n' is not defined")
	e.ok(`{"operation":"evaluate","expression":"n","frame_id":`+after(t, inner, "#0 frame_id ")+`}`, "7 (int)")
	e.ok(`{"operation":"step_over"}`, "app.py:6 in square", "6 | return result")
	e.ok(`{"operation":"evaluate","expression":"result + 1"}`, "50 (int)")
	e.ok(`{"operation":"step_out"}`, "app.py:13 in main")
	e.ok(`{"operation":"evaluate","expression":"name.upper()"}`, "'BERTH' (str)")
	e.fails(`{"operation":"evaluate","expression":"undefined_name"}`, "evaluate", "undefined_name")

	e.ok(`{"operation":"continue"}`, "the session ended: the program ended (exit code 0)")
	e.ok(`{"operation":"output"}`, "stdout:\ntotal 49", "stderr:\nto stderr")
	e.ok(`{"operation":"status"}`, "no debug session is running", "the last one (debugpy, app.py) ended: the program ended (exit code 0)")
	e.fails(`{"operation":"stack"}`, "no debug session is running")
	noProcess(t, e.dir)
}
