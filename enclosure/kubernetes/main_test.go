package kubernetes

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/berth-dev/berth/enclosure/docker/dockertest"
	"github.com/berth-dev/berth/enclosure/enclosuretest"
	"github.com/berth-dev/berth/enclosure/kubernetes/kubetest"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
)

// The stand-in's pods are Docker containers, labelled as this package's
// own so that the count before and after ignores other packages' tests.
func TestMain(m *testing.M) { dockertest.Main(m, testLabel) }

const testLabel = "berth.test=enclosure-kubernetes"

// standIn is the API-server stand-in with the tests' relay.
func standIn(t testing.TB) *kubetest.Server { return kubetest.New(t, relaytest.Built()) }

var podSeq atomic.Int64

// runPod runs a pod in the stand-in: named after the test, its container
// labelled testLabel.
func runPod(t testing.TB, s *kubetest.Server, p kubetest.Pod) string {
	t.Helper()
	if p.Name == "" {
		p.Name = fmt.Sprintf("pod-%d", podSeq.Add(1))
	}
	if p.Image == "" {
		p.Image = enclosuretest.FullImage
	}
	p.DockerFlags = append(p.DockerFlags, "--label", testLabel)
	return s.RunPod(t, p)
}

// newDriver is a driver on the stand-in (unless o names a configuration).
func newDriver(t testing.TB, s *kubetest.Server, o Options) *Driver {
	t.Helper()
	if o.Rest == nil && o.Kubeconfig == "" && s != nil {
		o.Rest = s.RestConfig()
	}
	o.Shared = relaytest.WithRelay(o.Shared, relaytest.Built())
	d := New(o)
	t.Cleanup(func() { d.Close() })
	return d
}

func attach(t testing.TB, d *Driver, id string) *pod {
	t.Helper()
	return enclosuretest.Attach[*pod](t, d, id)
}
