package kubernetes

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure/docker/dockertest"
	"github.com/berth-dev/berth/enclosure/kubernetes/kubetest"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
)

// testLabel marks the containers behind this package's pods, so the
// count before and after ignores other packages' tests.
const testLabel = "berth.test=enclosure-kubernetes"

// Images the tests run, as scripts/images builds them.
const (
	fullImage = "berth/full:dev"
	baseImage = "berth/base:bookworm" // no relay, no python
)

// testRelay is the relay built as scripts/images builds it.
var testRelay *relay.Binary

func TestMain(m *testing.M) {
	relaytest.DriverMain(m, func(bin *relay.Binary) (func() (int, error), error) {
		testRelay = bin
		// A missing engine fails the run: the stand-in's pods are Docker
		// containers.
		if err := dockertest.Engine(); err != nil {
			return nil, err
		}
		return func() (int, error) { return dockertest.Count(testLabel) }, nil
	})
}

// standIn is the API-server stand-in with the tests' relay.
func standIn(t testing.TB) *kubetest.Server { return kubetest.New(t, testRelay) }

var podSeq atomic.Int64

// runPod runs a pod in the stand-in: named after the test, its container
// labelled testLabel.
func runPod(t testing.TB, s *kubetest.Server, p kubetest.Pod) string {
	t.Helper()
	if p.Name == "" {
		p.Name = fmt.Sprintf("pod-%d", podSeq.Add(1))
	}
	if p.Image == "" {
		p.Image = fullImage
	}
	p.DockerFlags = append(p.DockerFlags, "--label", testLabel)
	return s.RunPod(t, p)
}

// workdir is a fresh directory for a pod to mount.
func workdir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// newDriver is a driver on the stand-in (unless o names a configuration).
func newDriver(t testing.TB, s *kubetest.Server, o Options) *Driver {
	t.Helper()
	if o.Config == nil && o.Kubeconfig == "" && s != nil {
		o.Config = s.RestConfig()
	}
	if o.Relay == nil {
		o.Relay = func() (*relay.Binary, error) { return testRelay, nil }
	}
	d := New(o)
	t.Cleanup(func() { d.Close() })
	return d
}

func attach(t testing.TB, d *Driver, id string) *pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	enc, err := d.Attach(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return enc.(*pod)
}
