package e2e

import (
	"context"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/enclosure/kubernetes/kubecluster"
	"github.com/berth-dev/berth/internal/errclass"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// The container suite against a real Kubernetes cluster (issue 26 items 2
// and 3): the single-node cluster scripts/kube starts, found from
// $KUBECONFIG (none fails the tests, never skips them; scripts/kube-stage
// runs them). Each test has a namespace of its own, where
// deploy/kubernetes's ServiceAccount, Role and RoleBinding (the files
// themselves) are applied; the binary runs with that ServiceAccount's
// token (kubernetes.kubeconfig), so each call the driver makes in each
// family is one the Role allows. Pods are made as a harness makes them
// (kubecluster.RunPod: hostNetwork, the workdir a subPath of a hostPath
// volume, labelled berth.conversation, sleep infinity); Berth creates
// none. The faults a real cluster cannot show on demand (WebSocket
// refused) stay with the stand-in's tests (e2e/kubernetes_test.go).

// engineCluster is place.engine for a pod of the real cluster.
const engineCluster = "cluster"

// clusterPlace is the real cluster, Berth's identity there, and the
// namespace the place's pods go in.
type clusterPlace struct {
	c *kubecluster.Cluster
	// id is deploy/kubernetes's ServiceAccount in Berth's namespace.
	id *kubecluster.Identity
	// podNamespace is where the pods go: Berth's, unless a test puts
	// them elsewhere.
	podNamespace string
}

// inCluster is a pod of image in a namespace of the test's, with the
// workdir at /workspace, and Berth's ServiceAccount there.
func inCluster(t *testing.T, image string) place {
	t.Helper()
	c := kubecluster.New(t)
	ns := c.Namespace(t, "berth-e2e")
	id := c.ServiceAccount(t, ns)
	return place{image: image, mount: "/workspace", engine: engineCluster, cluster: &clusterPlace{c: c, id: id, podNamespace: ns}}
}

// startClusterPod runs the site's pod: its container mounts dir as the
// subPath of a hostPath volume of dir's parent, the volume Berth sees at
// its root (clusterSection).
func startClusterPod(t *testing.T, p place, dir, conversation string) *kubecluster.Pod {
	t.Helper()
	return p.cluster.c.RunPod(t, kubecluster.PodSpec{Namespace: p.cluster.podNamespace, Conversation: conversation,
		Image: p.image, Workdir: filepath.Dir(dir), SubPath: filepath.Base(dir), MountPath: p.mount})
}

// clusterSection points the binary at the cluster with the
// ServiceAccount's kubeconfig (its namespace is the context's), with the
// test's temporary directory as the workspace volume's root, and lets
// "auto" look there.
func clusterSection(t *testing.T, p place) family {
	root, err := filepath.EvalSymlinks(filepath.Dir(t.TempDir())) // every site's workdir is under it
	if err != nil {
		t.Fatal(err)
	}
	return family{name: "cluster", config: map[string]any{
		"kubernetes": map[string]any{
			"kubeconfig":       p.cluster.id.Kubeconfig,
			"workspace_volume": map[string]any{"name": kubecluster.WorkspaceVolume, "path": root},
		},
		"enclosure": map[string]any{"auto": []string{engineKubernetes}},
	}}
}

// podCount is the number of pods in the place's namespace.
func podCount(t *testing.T, p place) int {
	t.Helper()
	l, err := p.cluster.c.Core.Pods(p.cluster.podNamespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(l.Items)
}

// The tool families in one berth/full pod of the real cluster, found by
// "auto", Berth with deploy/kubernetes's ServiceAccount: one binary, a
// run per family in a part of the tree the pod mounts, each family's own
// checks (lsp and lsp_rename with gopls; ast_grep, ast_edit and resolve,
// with gopls's new problems;
// debugpy launched and attached, dlv, both dialled through port-forwards;
// kernels' state and tool() re-entry; workers), each ending with run/stop
// leaving the pod's own process alone. Berth creates no pod.
//
// Issue 26 items 2 and 3.
func TestClusterFamilies(t *testing.T) {
	t.Parallel()
	p := inCluster(t, fullImage)
	p.auto = true
	s := p.fresh(t)
	families := []family{lspGo, resolveChecks, structural, debugpy, debugAttach, debugDelve, eval, vibeWorkers()}
	c := startFamilies(t, append(families, clusterSection(t, p))...)
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) { f.check(t, c, s.sub(t, f.name)) })
	}
	if n := podCount(t, p); n != 1 {
		t.Errorf("pods in the namespace after the families: %d, want the test's one", n)
	}
	// The language servers Berth parked for the next run stay (issue 28
	// item 2), and nothing else.
	if procs := s.unparked(t); len(procs) != 0 {
		t.Errorf("the pod's processes after the families, less its own sleep and the parked language servers: %q, want none", procs)
	}
}

// Attached by name ({driver: kubernetes, id: namespace/pod}), a kernel's
// stdin and stdout are handed over a socket in the workdir
// (kubernetes.stdio: socket, the default), by the relay that holds it
// should Berth go away; with kubernetes.stdio: exec they go through the
// exec's stream, and eval works the same.
//
// Issue 26 item 2; issue 29 item 2.
func TestClusterAttachByNameKernelStdioSocketAndExec(t *testing.T) {
	t.Parallel()
	p := inCluster(t, fullImage)
	s := p.fresh(t)
	section := clusterSection(t, p)
	t.Run("socket", func(t *testing.T) {
		stdioSocket.check(t, startFamilies(t, stdioSocket, section), s.sub(t, "socket"))
	})
	t.Run("exec", func(t *testing.T) {
		kube := maps.Clone(section.config["kubernetes"].(map[string]any))
		kube["stdio"] = "exec"
		c := startFamilies(t, family{config: map[string]any{"kubernetes": kube, "enclosure": section.config["enclosure"], "kernels": kernelsSection["kernels"]}})
		sub := s.sub(t, "exec")
		run := sub.start(t, c, nil)
		// The kernel's descriptors: its protocol's are the exec's pipes.
		res := evalCell(t, c, run, "python", "import os\nsorted({os.readlink('/proc/self/fd/'+fd).split(':')[0] for fd in os.listdir('/proc/self/fd') if os.path.exists('/proc/self/fd/'+fd)})")
		if got := text(res); res.IsError || strings.Contains(got, "'socket'") || !strings.Contains(got, "'pipe'") {
			t.Errorf("the kernel's descriptors with kubernetes.stdio exec: %s, want pipes and no socket", got)
		}
		if res := evalCell(t, c, run, "python", "x = 6 * 7\nx"); res.IsError || text(res) != "42" {
			t.Errorf("a cell with kubernetes.stdio exec: %s", text(res))
		}
		if err := c.StopRun(testCtx(t), run); err != nil {
			t.Fatal(err)
		}
		sub.waitNoProcesses(t, "run/stop")
	})
}

// The pod deleted (grace 0) in the middle of a call: that call ends with
// an error result that says the pod does not exist, later calls of its
// run too, and a run in another pod keeps its kernel and its state;
// run/stop of that one leaves no process.
//
// Issue 26 item 2.
func TestClusterPodDeletedMidCall(t *testing.T) {
	t.Parallel()
	p := inCluster(t, fullImage)
	kernels := family{config: map[string]any{"kernels": map[string]any{"python": "/usr/bin/python3"}}}
	stoppedMidCall(t, p, []family{clusterSection(t, p), kernels}, func(container string) {
		k := p.cluster.c.PodOf(container)
		if k == nil {
			t.Fatalf("no pod behind container %s", container)
		}
		start := time.Now()
		if err := k.Delete(); err != nil {
			t.Fatal(err)
		}
		t.Logf("pod %s deleted and its container gone in %s", k.ID(), time.Since(start).Round(time.Millisecond))
	}, "does not exist", "does not exist")
}

// A workdir the pod does not mount is refused at run/start, by name and
// by "auto", with an error naming the mounts found.
//
// Issue 26 item 2.
func TestClusterUnmountedWorkdirRefused(t *testing.T) {
	t.Parallel()
	p := inCluster(t, fullImage)
	unmountedWorkdirRefused(t, p.fresh(t), startFamilies(t, clusterSection(t, p)), engineKubernetes)
}

// A pod in a namespace deploy/kubernetes's Role does not cover, named in
// run/start, is refused with an error that says the API server refused
// Berth, names Berth's ServiceAccount and the namespace, and says what
// to do: bind the Role there, or put the pod in Berth's namespace.
//
// Issue 26 item 3.
func TestClusterPodOutsideTheRolesNamespaceIsRefused(t *testing.T) {
	t.Parallel()
	p := inCluster(t, fullImage)
	c := startFamilies(t, clusterSection(t, p))
	elsewhere := p
	elsewhere.cluster = &clusterPlace{c: p.cluster.c, id: p.cluster.id, podNamespace: p.cluster.c.Namespace(t, "berth-elsewhere")}
	s := elsewhere.fresh(t)
	_, err := c.StartRun(testCtx(t), rpc.StartRunParams{Workdir: s.Dir, ConversationID: s.Conversation,
		Enclosure: &rpc.EnclosureParam{Driver: engineKubernetes, ID: s.Pod}})
	t.Logf("run/start in %s: %v", s.Pod, err)
	// The cluster refuses Berth: class permission (issue 27 item 3).
	if rpcCode(err) != rpc.CodePermission || rpcClass(err) != errclass.Permission {
		t.Errorf("run/start in a pod outside the Role's namespace: %v (code %d, class %q); want permission (%d)", err, rpcCode(err), rpcClass(err), rpc.CodePermission)
	}
	ns := elsewhere.cluster.podNamespace
	for _, w := range []string{"refused Berth", "forbidden", `User "` + p.cluster.id.User + `"`, `in the namespace "` + ns + `"`,
		"RoleBinding in namespace " + ns, "Berth's namespace " + p.cluster.id.Namespace} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("run/start in a pod outside the Role's namespace: %v; want an error saying %q", err, w)
		}
	}
}
