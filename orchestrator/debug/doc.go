// Package debug is the debug tool: it drives debuggers (debugpy, delve,
// lldb-dap, dart) over the Debug Adapter Protocol with go-dap, one session
// per conversation, with a strict time to live.
//
// It holds the adapter catalog and its detection (root marker and
// executable, the intersection rule), a DAP client with one reader
// goroutine, the session and the provider that maps the tool's
// operations onto a session. A session (handshake, stops, its end) is
// composed of the adapter's process and client (adapterLink), what the
// adapter's events said about the program: stops, exit, breakpoints and
// output (programState), the paths across the enclosure's boundary
// (paths) and the adapter's quirks, read from its catalog entry (Adapter).
//
// It must never start an adapter outside the run's enclosure, never leave
// an adapter or a debuggee running after its session ends, and never let
// a misbehaving adapter hang a tool call: every wait is bounded.
package debug
