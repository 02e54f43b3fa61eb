package debug

import "testing"

// TestDelveTranscript drives a real dlv dap (TCP, reached through the
// enclosure's Dial) on a Go package it builds first.
func TestDelveTranscript(t *testing.T) {
	e := newEnv(t, "golang", nil)
	e.ok(`{"operation":"breakpoints","file":"main.go","lines":[22]}`, "stored 1 breakpoint", "22 | total := square(7)")
	e.ok(`{"operation":"launch","program":"."}`,
		"launched . with delve", "main.go:22 verified", "stopped (breakpoint)", "main.go:22 in main.main", "22 | total := square(7)")
	st := e.ok(`{"operation":"stack"}`, "#0 frame_id", "main.go:22 in main.main")
	sc := e.ok(`{"operation":"scopes","frame_id":`+after(t, st, "frame_id ")+`}`, "Locals: reference")
	locals := e.ok(`{"operation":"variables","reference":`+after(t, sc, "Locals: reference ")+`}`, `name (string) = "berth"`, "(cut: showing 400 of")
	e.ok(`{"operation":"variables","reference":`+reference(t, locals, "items ")+`}`, "(showing 50 of", "[0] (int) = 0", "[49] (int) = 49")
	e.ok(`{"operation":"step_in"}`, "main.go:9 in main.square", "9 | func square(n int) int {")
	e.ok(`{"operation":"step_over"}`, "main.go:10 in main.square", "10 | result := n * n")
	e.ok(`{"operation":"step_over"}`, "main.go:11 in main.square")
	e.ok(`{"operation":"evaluate","expression":"result + 1"}`, "50")
	e.ok(`{"operation":"step_out"}`, "main.go:22 in main.main")
	e.ok(`{"operation":"evaluate","expression":"len(name)"}`, "5")
	e.ok(`{"operation":"continue"}`, "the session ended: the program ended (exit code 0)")
	e.ok(`{"operation":"output"}`, "total 49 500 10000 berth", "stderr:\nto stderr")
	noProcess(t, e.dir)
}
