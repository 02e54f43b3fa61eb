package wire

import "testing"

// TestFrameHeaders: a length header never has the signal bit, and a
// signal's number fits the low byte the relay reads it from.
func TestFrameHeaders(t *testing.T) {
	if MaxFrame&SignalFrame != 0 || MaxFrame >= SignalFrame {
		t.Errorf("MaxFrame %#x reaches SignalFrame %#x: a long frame would read as a signal", MaxFrame, SignalFrame)
	}
	if SignalFrame&0xff != 0 {
		t.Errorf("SignalFrame %#x overlaps the low byte that carries the signal", SignalFrame)
	}
	if uint64(SignalFrame) > 1<<32-1 {
		t.Errorf("SignalFrame %#x does not fit a 4-byte header", SignalFrame)
	}
}

// TestDistinct: the stdin modes and the exit codes are told apart by
// value, so no two may share one.
func TestDistinct(t *testing.T) {
	modes := map[string]bool{StdinRaw: true, StdinFramed: true, StdinInherit: true}
	if len(modes) != 3 {
		t.Errorf("stdin modes share a name: %v", modes)
	}
	codes := map[int]bool{ExitRelayFailed: true, ExitNotExec: true, ExitNotFound: true}
	if len(codes) != 3 {
		t.Errorf("exit codes share a value: %v", codes)
	}
}
