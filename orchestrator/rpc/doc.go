// Package rpc is Berth's harness protocol: JSON-RPC 2.0 in both directions
// over stdio (Content-Length framing, as LSP), WebSocket (one message per
// text frame, bearer token) and a unix socket (WebSocket without a token,
// guarded by the socket's file mode).
//
// The protocol itself is go.lsp.dev/jsonrpc2's Conn: jsonrpc2.DecodeMessage
// is the one check of a message, and $/cancelRequest goes through the
// library's Preempter and CancelHandler. What stays here is Berth's own:
// the thin stream in front of the library (the framers of frame.go and
// stream.go for bad frames, resynchronisation and the size cap, and
// wire.go, which answers in Berth's words what the library refuses), what
// Berth promises beyond the library's dispatch (peer.go: the reply size
// cap, panics answered), the session that maps the protocol's methods onto
// the core (server.go, session.go, params.go, whose params schemas go
// through the validator that checks tools' arguments), the HTTP transport
// (http.go) and the Go client a harness imports (client.go). Its one JSON
// API is encoding/json.
//
// It must never know about a tool family: tools are reached only through
// orchestrator.Registry, and the harness is offered to tools only as the
// orchestrator.Harness each run carries. A malformed message never closes a
// connection: it gets an error reply and the next message is read; on
// stdio the stream reader (stream.go) resynchronises on the next header
// after a bad one.
package rpc
