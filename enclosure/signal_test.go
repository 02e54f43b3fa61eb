package enclosure

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
)

// otherSignal is an os.Signal that is not a syscall.Signal.
type otherSignal struct{}

func (otherSignal) String() string { return "other" }
func (otherSignal) Signal()        {}

func TestCheckSignal(t *testing.T) {
	running := make(chan struct{})
	s, err := CheckSignal(syscall.SIGTERM, running)
	if err != nil || s != syscall.SIGTERM {
		t.Fatalf("CheckSignal(SIGTERM, running) = %v, %v; want SIGTERM, nil", s, err)
	}
	if _, err := CheckSignal(os.Signal(otherSignal{}), running); !errors.Is(err, ErrNotSupported) {
		t.Errorf("CheckSignal(not a syscall.Signal) = %v, want ErrNotSupported", err)
	}
	exited := make(chan struct{})
	close(exited)
	if _, err := CheckSignal(syscall.SIGINT, exited); err == nil || !strings.Contains(err.Error(), "the process has exited") {
		t.Errorf("CheckSignal(SIGINT, exited) = %v, want an error saying the process has exited", err)
	}
}
