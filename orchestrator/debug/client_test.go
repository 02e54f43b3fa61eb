package debug

import (
	"strings"
	"testing"

	"github.com/google/go-dap"
)

// An adapter that answers a request under another command yields an error
// the model can act on, not a panic.
func TestAsRefusesAnotherResponse(t *testing.T) {
	if r, err := as[*dap.ThreadsResponse]("threads", &dap.ThreadsResponse{}); err != nil || r == nil {
		t.Fatalf("the expected response: %v, %v", r, err)
	}
	_, err := as[*dap.ThreadsResponse]("threads", &dap.ScopesResponse{})
	if err == nil || !strings.Contains(err.Error(), "answered threads with an unexpected message (*dap.ScopesResponse): call status") {
		t.Fatalf("another response: %v", err)
	}
}
