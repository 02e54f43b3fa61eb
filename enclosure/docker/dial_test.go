package docker

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"

	"github.com/berth-dev/berth/enclosure/relay/wire"
)

// frame is one frame of an exec's stream as Docker multiplexes it: the
// stream's type, three zero bytes, the length (big-endian), the bytes.
func frame(kind stdcopy.StdType, b []byte) []byte {
	h := make([]byte, 8, 8+len(b))
	h[0] = byte(kind)
	binary.BigEndian.PutUint32(h[4:], uint32(len(b)))
	return append(h, b...)
}

// The relay's ready line still gets through behind what a server said
// first, up to earlyOutput bytes of it (debugpy's adapter speaks at
// once): Dial would otherwise wait for a line stuck behind bytes nobody
// reads until it returns. What the server said then reads whole and in
// order from the connection, followed by the rest. The stream is made as
// Docker multiplexes an exec's, with the greeting first, which the real
// relay does not always do (TestDialThroughTheRelayKeepsWhatAServerSaysFirst).
//
// Issue 13 item 3 (the dial's buffer before ready).
func TestDialReadyComesThroughWhatAServerSaidFirst(t *testing.T) {
	greeting := make([]byte, earlyOutput)
	for i := range greeting {
		greeting[i] = byte(i % 251)
	}
	var stream bytes.Buffer
	for off := 0; off < len(greeting); off += 32 << 10 { // frames as Docker cuts them
		stream.Write(frame(stdcopy.Stdout, greeting[off:min(off+32<<10, len(greeting))]))
	}
	stream.Write(frame(stdcopy.Stderr, []byte(wire.ReadyLine+"\n")))
	stream.Write(frame(stdcopy.Stdout, []byte("after")))
	// The exec's stream stays open, as a live connection's does.
	r, w := io.Pipe()
	go func() { _, _ = w.Write(stream.Bytes()) }()
	t.Cleanup(func() { w.Close() })

	mine, theirs := net.Pipe()
	defer mine.Close()
	ended := make(chan struct{})
	ready, _ := splitDial(r, theirs, func() { close(ended) })
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("ready: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the ready line behind %d bytes the server said first never came through", len(greeting))
	}
	got := make([]byte, len(greeting)+len("after"))
	if _, err := io.ReadFull(mine, got); err != nil {
		t.Fatalf("reading what the server said: %v", err)
	}
	if !bytes.Equal(got[:len(greeting)], greeting) || string(got[len(greeting):]) != "after" {
		t.Fatal("what the server said first does not read back whole and in order")
	}
	w.Close()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the end of the stream was not seen")
	}
}

// More than earlyOutput before the ready line (and than the 32 KiB the
// copy to the connection holds besides) holds the line back: Dial then gives up at its deadline, and early says how much the
// server sent first, for its error to name the limit and the way out
// (docker.dial: netns).
//
// Issue 13 item 3 (the dial's buffer before ready).
func TestDialReadyIsHeldBackPastTheEarlyOutputLimit(t *testing.T) {
	var stream bytes.Buffer
	greeting := bytes.Repeat([]byte("g"), earlyOutput+64<<10)
	for off := 0; off < len(greeting); off += 32 << 10 {
		stream.Write(frame(stdcopy.Stdout, greeting[off:min(off+32<<10, len(greeting))]))
	}
	stream.Write(frame(stdcopy.Stderr, []byte(wire.ReadyLine+"\n")))
	r, w := io.Pipe()
	go func() { _, _ = w.Write(stream.Bytes()) }()
	mine, theirs := net.Pipe()
	ready, early := splitDial(r, theirs, func() {})
	select {
	case err := <-ready:
		t.Fatalf("the ready line came through behind %d bytes: %v", len(greeting), err)
	case <-time.After(500 * time.Millisecond):
	}
	if n := early(); n <= earlyOutput {
		t.Errorf("early says %d bytes came first, want more than %d", n, earlyOutput)
	}
	// Ended as Dial ends a connection it gives up on: nothing is left
	// waiting.
	mine.Close()
	w.Close()
}
