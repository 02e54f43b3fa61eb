// Package bridge is the pipe protocol between Berth and a process it runs
// that speaks back (a kernel driver first): framing, the message set, the
// versioned ready handshake and tool() re-entry frames.
//
// Frames travel over the process's own stdin and stdout, the only pipes a
// container exec offers. Each frame is one line: a record separator byte
// (0x1E), a JSON object, a newline. Bytes outside a frame are never taken
// for one: they come back as stray text, so a write that slips past the
// driver's capture (a native add-on writing to fd 1) shows up as output
// instead of corrupting the stream; a frame such a write tears comes back
// as text too, and the frames after it are read whole.
//
// The package must never open a port or a socket, nor carry a secret: the
// pipe is the only channel.
package bridge
