package kubernetes

import (
	"context"
	"io"
	"testing"

	"github.com/berth-dev/berth/enclosure/kubernetes/kubetest"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
)

// BenchmarkStart: a process started under the relay and
// waited for, against a bare exec of /bin/true, through the API-server
// stand-in (WebSocket, then SPDY): what an exec through the API server
// costs, and the relay's share of it.
//
// Issue 16 item 8.
func BenchmarkStart(b *testing.B) {
	s := standIn(b)
	p := attach(b, newDriver(b, s, Options{}), runPod(b, s, kubetest.Pod{}))
	bare := func(ctx context.Context, argv []string, stdin io.Reader) (relay.Result, error) {
		return p.run(ctx, argv, stdin)
	}
	b.Run("websocket", func(b *testing.B) { relaytest.BenchStart(b, p, bare) })
	s.RefuseWebSockets(true)
	b.Run("spdy", func(b *testing.B) { relaytest.BenchStart(b, p, bare) })
}
