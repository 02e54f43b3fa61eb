package kubernetes

import (
	"bufio"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure"
)

// clusterEnv turns on TestClusterDriverExecKillAndDial; clusterPodEnv names the pod
// it attaches to.
const (
	clusterEnv    = "BERTH_KUBE_TEST"
	clusterPodEnv = "BERTH_KUBE_POD"
)

// The driver against a real cluster, which the stand-in can only stand
// in for: run only when BERTH_KUBE_TEST=1, with a kubeconfig ($KUBECONFIG
// or ~/.kube/config) and BERTH_KUBE_POD naming a running pod
// (namespace/pod[/container]) whose container has sh. scripts/test's
// cluster stage (scripts/kube-stage) starts a real single-node cluster
// with scripts/kube, makes the pod as a harness would and sets both;
// elsewhere the test says it did not run rather than pass in silence,
// and scripts/kube-stage fails on that line. Berth creates no pod: the
// tester does.
//
// Issue 16; issue 26 item 1 (scripts/kube).
func TestClusterDriverExecKillAndDial(t *testing.T) {
	if os.Getenv(clusterEnv) != "1" {
		t.Logf("NOT RUN: no real cluster given. The driver was tested against the API-server stand-in only (kubetest); to run this test against a cluster (scripts/kube start makes one; see docs/development/testing.md), set %s=1, a kubeconfig ($KUBECONFIG), and %s=namespace/pod of a running pod with sh", clusterEnv, clusterPodEnv)
		return
	}
	id := os.Getenv(clusterPodEnv)
	if id == "" {
		t.Fatalf("%s=1 but %s is empty: name a running pod as namespace/pod[/container]", clusterEnv, clusterPodEnv)
	}
	d := newDriver(t, nil, Options{})
	p := attach(t, d, id)
	t.Logf("attached to %s; relay at %s", p.ID(), p.Relay)

	protocol, out, errOut, code := execIn(t, p, enclosure.Cmd{Path: "sh", Args: []string{"-c", "cat; echo e >&2; exit 3"}}, "through the API server\n")
	if out != "through the API server\n" || errOut != "e\n" || code != 3 {
		t.Errorf("exec: stdout %q, stderr %q, exit %d", out, errOut, code)
	}
	t.Logf("the exec went over %s", protocol)

	proc, err := p.Start(context.Background(), enclosure.Cmd{Path: "sh", Args: []string{"-c", "sleep 1000 & echo started; wait"}})
	if err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(proc.Stdout()).ReadString('\n'); line != "started\n" {
		t.Fatalf("first line %q", line)
	}
	_ = proc.Kill()
	if code, err := proc.Wait(); code != -1 || err != nil {
		t.Errorf("killed: exit %d, %v", code, err)
	}
	// The relay killed the group: no sleep 1000 is left.
	var ps string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		r, err := p.run(context.Background(), []string{"sh", "-c", "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ps = r.Stdout; !strings.Contains(ps, "sleep 1000") {
			break
		}
	}
	if strings.Contains(ps, "sleep 1000") {
		t.Errorf("processes left after Kill:\n%s", ps)
	}

	conn, err := p.Dial(context.Background(), 1)
	if err == nil {
		_ = conn.SetDeadline(time.Now().Add(time.Minute))
		_, err = io.ReadAll(conn)
		conn.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("a port-forward to a port nothing listens on: %v", err)
	}
}
