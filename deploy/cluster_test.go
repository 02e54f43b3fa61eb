package deploy_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// clusterEnv turns the TestCluster tests on: scripts/kube-stage sets it,
// with $KUBECONFIG naming the cluster scripts/kube started and kubectl on
// PATH. Without it they say they did not run, and kube-stage fails on
// that line.
const clusterEnv = "BERTH_KUBE_TEST"

// prometheusOperatorVersion is the prometheus-operator release whose CRDs
// (example/prometheus-operator-crd in its main module) the cluster test
// applies before the ServiceMonitor, PodMonitor and PrometheusRule. The
// Go module proxy refuses the main module at v0.95.x (go.mod's
// pkg/apis/monitoring is v0.95.2, a module of its own); v0.94.0 is the
// newest it serves.
const prometheusOperatorVersion = "v0.94.0"

// monitoringCRDs are the CRDs of the kinds the shapes use.
var monitoringCRDs = []string{"servicemonitors", "podmonitors", "prometheusrules"}

// clusterShape is a shape of deploy/kubernetes as the test overlay
// applies it.
type clusterShape struct {
	name string // the namespace's prefix
	dir  string // the shape's kustomization, relative to deploy/
	// port is rpc.listen's on 127.0.0.1: hostNetwork pods share the
	// host's interfaces, so each shape needs its own.
	port int
	// sidecar: Berth is in the sandbox pod; else beside the harness, in
	// the Deployment's pod, reaching the sandbox pod through the API
	// server.
	sidecar bool
}

var clusterShapes = []clusterShape{
	{name: "berth-beside", dir: "kubernetes", port: 17371},
	{name: "berth-sidecar", dir: "kubernetes/sidecar", port: 17372, sidecar: true},
}

// Issue 26 item 4: both shapes of deploy/kubernetes applied to a real
// cluster (scripts/kube's) through a test overlay that the test writes
// with the shape as its base. The overlay runs the pods with hostNetwork
// and imagePullPolicy Never (the image is images/berth's berth/berth:dev,
// imported by scripts/kube), sets rpc.listen to 127.0.0.1 and a port of
// the shape's own, httpGet.host 127.0.0.1 on every probe, and
// KUBERNETES_SERVICE_HOST=127.0.0.1 and KUBERNETES_SERVICE_PORT to the
// API server's port, so client-go's in-cluster configuration dials the
// API server on loopback (its certificate covers 127.0.0.1). It adds the
// berth-token Secret, binds the workspace claim to a static hostPath
// PersistentVolume, and the ServiceMonitor, PodMonitor and
// PrometheusRule go in with prometheus-operator's CRDs. The test plays
// the harness from the host: it makes the sandbox pod from the shape's
// template (labelled with the conversation; the sidecar shape's with a
// nodeName), waits for Ready, and through a port-forward to Berth's
// listener drives run/start with enclosure "auto", one eval and one lsp
// call. Berth's process holds a connection to the API server at
// 127.0.0.1 and none elsewhere.
//
// Issue 29: then, with x = 41 in the run's Python kernel, Berth's
// container is replaced in the running pod (replaceBerthContainer: a new
// tag of its image patched into the pod; its preStop hook hands off),
// and the run/start with the same runId, conversationId, workdir and
// enclosure, through a new port-forward, answers resumed with x + 1 42:
// in both shapes the kernel runs in the sandbox container, in Berth's pod
// (sidecar) or in the sandbox pod (beside the harness), and outlives
// Berth's container. The pod is the same (its UID). Everything is deleted
// at the end, and no process of the pods is left.
func TestClusterDeployShapesServeEvalAndLSP(t *testing.T) {
	if os.Getenv(clusterEnv) != "1" {
		t.Logf("NOT RUN: no real cluster given. To apply deploy/kubernetes's shapes to one (scripts/kube start makes it; see docs/development/testing.md), set %s=1, $KUBECONFIG, and put kubectl on PATH (scripts/kube-stage does)", clusterEnv)
		return
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	k := newKubectl(ctx, t)
	installMonitoringCRDs(ctx, t, k)
	node := k.run(ctx, t, "", "get", "nodes", "-o", "jsonpath={.items[0].metadata.name}")
	for _, s := range clusterShapes {
		t.Run(s.name, func(t *testing.T) { applyShape(ctx, t, k, s, node) })
	}
	t.Logf("the cluster test took %s", time.Since(start).Round(time.Millisecond))
}

// kubectl runs kubectl against $KUBECONFIG's cluster.
type kubectl struct {
	bin              string
	apiHost, apiPort string // the API server's, from the kubeconfig
}

func newKubectl(ctx context.Context, t *testing.T) *kubectl {
	t.Helper()
	if os.Getenv("KUBECONFIG") == "" {
		t.Fatalf("%s=1 but $KUBECONFIG is empty: name the admin kubeconfig scripts/kube start printed", clusterEnv)
	}
	bin, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("kubectl is not on PATH (scripts/kube builds it into ~/.cache/berth/kube/<version>/bin): %v", err)
	}
	k := &kubectl{bin: bin}
	server := k.run(ctx, t, "", "config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}")
	u, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	k.apiHost, k.apiPort = u.Hostname(), u.Port()
	if k.apiHost != "127.0.0.1" || k.apiPort == "" {
		t.Fatalf("the kubeconfig's API server is %s: the pods reach it through KUBERNETES_SERVICE_HOST=127.0.0.1, so it must listen on 127.0.0.1 (scripts/kube's does)", server)
	}
	return k
}

// try runs kubectl with stdin and returns its stdout; the error has its
// stderr.
func (k *kubectl) try(ctx context.Context, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, k.bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// run is try for a call whose failure ends the test.
func (k *kubectl) run(ctx context.Context, t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := k.try(ctx, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// must is for what fails only on a bug of the test (marshalling its own
// values).
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// installMonitoringCRDs applies prometheus-operator's CRDs of the kinds
// the shapes use (from its module, which go mod download fetches from the
// module proxy or the module cache), and deletes at cleanup those it
// created.
func installMonitoringCRDs(ctx context.Context, t *testing.T, k *kubectl) {
	t.Helper()
	mod := "github.com/prometheus-operator/prometheus-operator@" + prometheusOperatorVersion
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", mod)
	cmd.Dir = t.TempDir() // outside deploy's module: go.mod stays as it is
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.Output()
	var dl struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &dl); jerr != nil || dl.Error != "" || err != nil {
		t.Fatalf("go mod download %s (prometheus-operator's CRDs): %v %s %s", mod, err, dl.Error, out)
	}
	for _, plural := range monitoringCRDs {
		name := plural + ".monitoring.coreos.com"
		file := filepath.Join(dl.Dir, "example/prometheus-operator-crd", "monitoring.coreos.com_"+plural+".yaml")
		if _, err := k.try(ctx, "", "get", "crd", name); err == nil {
			t.Logf("CRD %s was there already: kept", name)
		} else {
			// Server-side: the CRDs are too big for the last-applied
			// annotation.
			if _, err := k.try(ctx, "", "apply", "--server-side", "-f", file); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if _, err := k.try(context.Background(), "", "delete", "crd", name, "--timeout=2m"); err != nil {
					t.Error(err)
				}
			})
		}
		// A CRD just made has no conditions yet, and kubectl wait
		// refuses one without them rather than waiting: try again.
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
			_, err := k.try(ctx, "", "wait", "--for=condition=Established", "crd/"+name, "--timeout=60s")
			if err == nil {
				break
			}
			if time.Now().After(deadline) || !strings.Contains(err.Error(), "accessor error") {
				t.Fatal(err)
			}
		}
	}
}

// applyShape applies one shape through its overlay in a namespace of its
// own and drives it as the harness would.
func applyShape(ctx context.Context, t *testing.T, k *kubectl, s clusterShape, node string) {
	start := time.Now()
	ns := s.name + "-" + randomHex(t, 3)
	conv := "conv-" + randomHex(t, 4)
	if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)), time.Second); err == nil {
		c.Close()
		t.Fatalf("127.0.0.1:%d, the overlay's rpc.listen, is taken: free it or change the port in clusterShapes", s.port)
	}
	base := buildShape(t, s.dir)
	o := writeOverlay(t, k, s, base, ns, node, conv)

	// Deleted at the end: the namespace (and all in it), then the
	// volume; the pods' processes must be gone with them.
	var podUIDs []string
	t.Cleanup(func() {
		c, s := context.Background(), time.Now()
		// The pods first, waiting for them: the namespace controller
		// then finds nothing left to wait for (it would requeue itself
		// for seconds per pod still terminating).
		if _, err := k.try(c, "", "-n", ns, "delete", "deployments,pods", "--all", "--cascade=foreground", "--timeout=2m"); err != nil {
			t.Error(err)
		}
		pods := time.Since(s)
		if _, err := k.try(c, "", "delete", "namespace", ns, "--timeout=3m"); err != nil {
			t.Error(err)
		}
		t.Logf("the pods deleted in %s, the namespace %s %s later", pods.Round(time.Millisecond), ns, (time.Since(s) - pods).Round(time.Millisecond))
		if o.volume != "" {
			if _, err := k.try(c, "", "delete", "pv", o.volume, "--timeout=1m"); err != nil {
				t.Error(err)
			}
		}
		if left := podProcesses(t, podUIDs); len(left) > 0 {
			t.Errorf("processes of the shape's pods left after the namespace was deleted: %v", left)
		}
	})
	k.run(ctx, t, "", "create", "namespace", ns)
	applied := time.Now()
	k.run(ctx, t, o.manifests, "apply", "-f", "-")

	// The pod Berth runs in, and the sandbox pod the harness makes from
	// the template (in the sidecar shape, the same pod).
	var berthPod, sandboxPod string
	if s.sidecar {
		sandboxPod = applySandbox(ctx, t, k, o, "sandbox-"+conv, conv)
		berthPod = sandboxPod
	} else {
		if _, err := k.try(ctx, "", "-n", ns, "rollout", "status", "deployment/harness", "--timeout=3m"); err != nil {
			t.Fatalf("%v\n%s", err, describe(k, ns))
		}
		berthPod = k.run(ctx, t, "", "-n", ns, "get", "pods", "-l", "app.kubernetes.io/name=harness", "-o", "jsonpath={.items[0].metadata.name}")
		t.Logf("%s: the harness's pod %s with Berth Ready %s after the apply", s.name, berthPod, time.Since(applied).Round(time.Millisecond))
		applied = time.Now()
		sandboxPod = applySandbox(ctx, t, k, o, "sandbox-"+conv, conv)
	}
	waitReady(ctx, t, k, ns, sandboxPod)
	t.Logf("%s: the sandbox pod %s Ready %s after it was applied", s.name, sandboxPod, time.Since(applied).Round(time.Millisecond))
	bp, sp := getPod(ctx, t, k, ns, berthPod), getPod(ctx, t, k, ns, sandboxPod)
	podUIDs = append(podUIDs, string(bp.UID))
	if sp.UID != bp.UID {
		podUIDs = append(podUIDs, string(sp.UID))
	}
	if s.sidecar && sp.Spec.NodeName != node {
		t.Errorf("the sidecar shape's pod runs on node %q, want the overlay's nodeName %q", sp.Spec.NodeName, node)
	}

	addr := portForward(ctx, t, k, ns, berthPod, s.port)
	workdir := "/workspace"
	if !s.sidecar {
		// The harness's path of the conversation's directory, which the
		// sandbox mounts (subPath) at /workspace.
		workdir = "/workspace/" + conv
	}
	c, err := rpc.DialWebSocket(ctx, "ws://"+addr+rpc.RPCPath, o.token, rpc.ClientOptions{})
	if err != nil {
		t.Fatalf("dialing Berth through the port-forward: %v\n%s", err, describe(k, ns))
	}
	defer func() {
		c.Close()
		http.DefaultClient.CloseIdleConnections()
	}()
	if _, err := c.Initialize(ctx, "berth-deploy-cluster", "test"); err != nil {
		t.Fatal(err)
	}
	// A runId of the harness's own: the run/start after the replacement
	// of Berth's container names it again.
	params := rpc.StartRunParams{RunID: "run-" + conv, Workdir: workdir, ConversationID: conv, Enclosure: &rpc.EnclosureParam{Driver: "auto"}}
	r, err := c.StartRun(ctx, params)
	if err != nil {
		t.Fatalf("run/start: %v\n%s", err, berthLog(k, ns, berthPod))
	}
	if want := (enclosure.Spec{Driver: "kubernetes", ID: ns + "/" + sandboxPod}); r.Enclosure.Driver != want.Driver || !strings.HasPrefix(r.Enclosure.ID, want.ID) {
		t.Errorf("run/start with enclosure auto chose %+v, want the sandbox pod %s", r.Enclosure, want.ID)
	}
	call := func(c *rpc.Client, name string, args map[string]any, want string) {
		t.Helper()
		s := time.Now()
		res, err := c.CallTool(ctx, r.RunID, orchestrator.SurfaceFull, name, args)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, berthLog(k, ns, berthPod))
		}
		if got := resultText(res); res.IsError || !strings.Contains(got, want) {
			t.Fatalf("%s %v: isError %v, want %q in:\n%s\n%s", name, args, res.IsError, want, got, berthLog(k, ns, berthPod))
		}
		t.Logf("%s answered in %s", name, time.Since(s).Round(time.Millisecond))
	}
	code := "import os\nprint(os.getcwd(), os.path.exists('main.go'), 6 * 7)"
	description := "print the kernel's directory and whether main.go is there"
	if s.sidecar {
		description = "write a small Go module, then print the directory"
		// The pod's emptyDir starts empty: the kernel writes the module.
		code = fmt.Sprintf("open('go.mod', 'w').write(%q)\nopen('main.go', 'w').write(%q)\n", liveTree["go.mod"], liveTree["main.go"]) + code
	}
	call(c, "eval", map[string]any{"language": "python", "code": code, "description": description}, "/workspace True 42")
	call(c, "lsp", map[string]any{"action": "definition", "file": "main.go", "line": 7, "symbol": "greet"}, "main.go:5")
	checkAPIServerDialedOnLoopback(t, k, bp)

	// Berth's container replaced in the running pod, which keeps its
	// berth-home emptyDir (the state directory) and, in both shapes, the
	// kernel: it runs in the sandbox container, of this pod (sidecar) or
	// of the sandbox pod (beside the harness), held by its relay while no
	// Berth is there.
	call(c, "eval", map[string]any{"language": "python", "code": "x = 41\nx", "description": "set x to 41 for after the replacement"}, "41")
	replaced := replaceBerthContainer(ctx, t, k, s, ns, berthPod, string(bp.UID))
	c.Close()
	addr = portForward(ctx, t, k, ns, berthPod, s.port)
	c, err = rpc.DialWebSocket(ctx, "ws://"+addr+rpc.RPCPath, o.token, rpc.ClientOptions{})
	if err != nil {
		t.Fatalf("dialing the new Berth through a new port-forward: %v\n%s", err, describe(k, ns))
	}
	if _, err := c.Initialize(ctx, "berth-deploy-cluster", "test"); err != nil {
		t.Fatal(err)
	}
	r2, err := c.StartRun(ctx, params)
	if err != nil {
		t.Fatalf("run/start of the run from before the replacement: %v\n%s", err, berthLog(k, ns, berthPod))
	}
	resumed := time.Since(replaced)
	if !r2.Resumed || r2.RunID != r.RunID || r2.Enclosure != r.Enclosure {
		t.Fatalf("run/start after the replacement answered %+v, want run %s resumed in %+v\n%s", r2, r.RunID, r.Enclosure, berthLog(k, ns, berthPod))
	}
	call(c, "eval", map[string]any{"language": "python", "code": "x + 1", "description": "add one to x set before the replacement"}, "42")
	t.Logf("%s: from the request to replace Berth's container to the resumed run/start: %s, to x + 1 answered: %s", s.name, resumed.Round(time.Millisecond), time.Since(replaced).Round(time.Millisecond))
	metrics := scrape(ctx, t, "http://"+addr+"/metrics")
	for _, want := range []string{`berth_restarts_total{how="handoff"} 1`, `berth_reattaches_total{kind="kernel",outcome="resumed"} 1`} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("the new Berth's /metrics has no %s: its preStop hook's handoff did not happen, or the kernel was not taken back", want)
		}
	}
	if after := getPod(ctx, t, k, ns, berthPod); after.UID != bp.UID {
		t.Errorf("pod %s's UID is %s after the replacement of Berth's container, was %s: the pod was replaced, not the container", berthPod, after.UID, bp.UID)
	}
	if err := c.StopRun(ctx, r.RunID); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: applied and answered in %s", s.name, time.Since(start).Round(time.Millisecond))
}

// overlay is what writeOverlay made.
type overlay struct {
	ns, token string
	manifests string             // the built overlay, for kubectl apply
	sandbox   corev1.PodTemplate // the built sandbox template
	volume    string             // the PersistentVolume's name, beside the harness
	hostPath  string             // its directory
	dir       string             // the overlay's directory
}

// writeOverlay writes the shape's test overlay into a directory of its own
// with the shape as its base, builds it with kustomize (as kubectl apply
// -k does), and checks what it built.
func writeOverlay(t *testing.T, k *kubectl, s clusterShape, base *shape, ns, node, conv string) *overlay {
	t.Helper()
	o := &overlay{ns: ns, token: randomHex(t, 24), dir: t.TempDir()}
	rel, err := filepath.Rel(o.dir, must(filepath.Abs(s.dir)))
	if err != nil {
		t.Fatal(err)
	}
	api := []map[string]any{
		{"name": "KUBERNETES_SERVICE_HOST", "value": k.apiHost},
		{"name": "KUBERNETES_SERVICE_PORT", "value": k.apiPort},
	}
	kust := map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"namespace":  ns,
		"resources":  []string{rel},
		// The token the harness presents (deployment.yaml, sidecar/sandbox.yaml).
		"secretGenerator": []map[string]any{{
			"name": "berth-token", "literals": []string{"token=" + o.token},
			"options": map[string]any{"disableNameSuffixHash": true},
		}},
	}
	var patches []map[string]any
	patch := func(kind, name string, ops []map[string]any) {
		patches = append(patches, map[string]any{"target": map[string]any{"kind": kind, "name": name}, "patch": string(must(json.Marshal(ops)))})
	}

	// rpc.listen on 127.0.0.1 and the shape's port, the rest of Berth's
	// configuration as the shape has it.
	if len(base.configMaps) != 1 {
		t.Fatalf("%s has %d ConfigMaps, want Berth's one", s.dir, len(base.configMaps))
	}
	for name, cm := range base.configMaps {
		text := cm.Data["berth.yaml"]
		const listen = "listen: 0.0.0.0:7070"
		if strings.Count(text, listen) != 1 {
			t.Fatalf("%s: ConfigMap %s's berth.yaml has no %q line for the overlay to replace", s.dir, name, listen)
		}
		text = strings.Replace(text, listen, fmt.Sprintf("listen: 127.0.0.1:%d", s.port), 1)
		patch("ConfigMap", name, []map[string]any{{"op": "replace", "path": "/data/berth.yaml", "value": text}})
	}

	if len(base.templates) != 1 {
		t.Fatalf("%s has %d PodTemplates, want the sandbox's", s.dir, len(base.templates))
	}
	tmpl := base.templates[0]
	tops := podOps("/template/spec", tmpl.Template.Spec, s.port, api)
	if s.sidecar {
		// The template made a pod on this node, as the harness would;
		// without a scheduler's choice.
		tops = append(tops, map[string]any{"op": "add", "path": "/template/spec/nodeName", "value": node})
	}
	patch("PodTemplate", tmpl.Name, tops)

	if !s.sidecar {
		if len(base.deployments) != 1 || len(base.claims) != 1 {
			t.Fatalf("%s has %d Deployments and %d claims, want the harness's and the workspace's", s.dir, len(base.deployments), len(base.claims))
		}
		d := base.deployments[0]
		ops := podOps("/spec/template/spec", d.Spec.Template.Spec, s.port, api)
		// The harness is the test, from the host: its container only
		// holds the pod (and its mounts) as yours would.
		for i, c := range d.Spec.Template.Spec.Containers {
			if c.Name != "harness" {
				continue
			}
			p := fmt.Sprintf("/spec/template/spec/containers/%d", i)
			ops = append(ops,
				map[string]any{"op": "replace", "path": p + "/image", "value": "berth/berth:dev"},
				map[string]any{"op": "add", "path": p + "/command", "value": []string{"sleep", "infinity"}})
			for j, e := range c.Env {
				if e.Name == "BERTH_URL" {
					ops = append(ops, map[string]any{"op": "replace", "path": fmt.Sprintf("%s/env/%d/value", p, j), "value": fmt.Sprintf("ws://127.0.0.1:%d/v1/rpc", s.port)})
				}
			}
		}
		patch("Deployment", d.Name, ops)

		// The ReadWriteMany claim bound to a static hostPath volume.
		var claim string
		for name := range base.claims {
			claim = name
		}
		patch("PersistentVolumeClaim", claim, []map[string]any{{"op": "add", "path": "/spec/storageClassName", "value": ""}})
		o.volume = "berth-workspace-" + ns
		o.hostPath = t.TempDir()
		// Berth (uid 65532) makes the stdio sockets in the conversation's
		// directory; the sandbox runs as root.
		writeTree(t, filepath.Join(o.hostPath, conv), map[string]string{"go.mod": liveTree["go.mod"], "main.go": liveTree["main.go"]})
		for _, p := range []string{o.hostPath, filepath.Join(o.hostPath, conv)} {
			if err := os.Chmod(p, 0o777); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range []string{"go.mod", "main.go"} {
			if err := os.Chmod(filepath.Join(o.hostPath, conv, f), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		pv := corev1.PersistentVolume{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
			ObjectMeta: metav1.ObjectMeta{Name: o.volume},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      base.claims[claim].Spec.Resources.Requests,
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: claim},
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: o.hostPath, Type: ptr(corev1.HostPathDirectory),
				}},
			},
		}
		writeFile(t, filepath.Join(o.dir, "volume.yaml"), string(must(yaml.Marshal(pv))))
		kust["resources"] = []string{rel, "volume.yaml"}
	}
	kust["patches"] = patches
	writeFile(t, filepath.Join(o.dir, "kustomization.yaml"), string(must(yaml.Marshal(kust))))

	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), o.dir)
	if err != nil {
		t.Fatalf("kustomize build of the test overlay %s: %v", o.dir, err)
	}
	var docs []string
	kinds := map[string]int{}
	for _, r := range m.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
		kinds[r.GetKind()]++
		where := s.name + " overlay: " + r.GetKind() + " " + r.GetName()
		switch r.GetKind() {
		case "PodTemplate":
			o.sandbox = into[corev1.PodTemplate](t, where, b)
			checkOverlaySpec(t, where, o.sandbox.Template.Spec, s, k)
		case "Deployment":
			d := into[appsv1.Deployment](t, where, b)
			checkOverlaySpec(t, where, d.Spec.Template.Spec, s, k)
		case "ConfigMap":
			cm := into[corev1.ConfigMap](t, where, b)
			if !strings.Contains(cm.Data["berth.yaml"], fmt.Sprintf("listen: 127.0.0.1:%d\n", s.port)) || strings.Contains(cm.Data["berth.yaml"], "0.0.0.0") {
				t.Errorf("%s: berth.yaml does not listen on 127.0.0.1:%d only:\n%s", where, s.port, cm.Data["berth.yaml"])
			}
		}
	}
	want := []string{"ServiceAccount", "Role", "RoleBinding", "PrometheusRule", "ConfigMap", "Secret", "PodTemplate"}
	if s.sidecar {
		want = append(want, "PodMonitor")
	} else {
		want = append(want, "Deployment", "Service", "ServiceMonitor", "PersistentVolumeClaim", "PersistentVolume")
	}
	for _, kind := range want {
		if kinds[kind] != 1 {
			t.Errorf("%s: the overlay builds %d %s, want 1 (all it built: %v)", s.name, kinds[kind], kind, kinds)
		}
	}
	o.manifests = strings.Join(docs, "---\n")
	return o
}

// podOps are the JSON patch operations that make a pod spec of a shape
// run here: hostNetwork; every image from the node's containerd; Berth
// on 127.0.0.1:port, its API server on loopback; every probe to
// 127.0.0.1. A short grace: the sleep of the sandbox (and of the
// harness's stand-in) ignores SIGTERM.
func podOps(prefix string, spec corev1.PodSpec, port int, apiEnv []map[string]any) []map[string]any {
	ops := []map[string]any{
		{"op": "add", "path": prefix + "/hostNetwork", "value": true},
		{"op": "add", "path": prefix + "/terminationGracePeriodSeconds", "value": 2},
	}
	for _, list := range []struct {
		field string
		cs    []corev1.Container
	}{{"initContainers", spec.InitContainers}, {"containers", spec.Containers}} {
		for i, c := range list.cs {
			p := fmt.Sprintf("%s/%s/%d", prefix, list.field, i)
			ops = append(ops, map[string]any{"op": "add", "path": p + "/imagePullPolicy", "value": "Never"})
			for name, probe := range map[string]*corev1.Probe{"startupProbe": c.StartupProbe, "readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe} {
				if probe != nil && probe.HTTPGet != nil {
					ops = append(ops, map[string]any{"op": "add", "path": p + "/" + name + "/httpGet/host", "value": "127.0.0.1"})
				}
			}
			if c.Name != "berth" {
				continue
			}
			for j, cp := range c.Ports {
				if cp.Name == "http" {
					ops = append(ops, map[string]any{"op": "replace", "path": fmt.Sprintf("%s/ports/%d/containerPort", p, j), "value": port})
				}
			}
			for _, e := range apiEnv {
				ops = append(ops, map[string]any{"op": "add", "path": p + "/env/-", "value": e})
			}
		}
	}
	return ops
}

// checkOverlaySpec checks that the overlay made a pod spec what podOps
// says.
func checkOverlaySpec(t *testing.T, where string, spec corev1.PodSpec, s clusterShape, k *kubectl) {
	t.Helper()
	if !spec.HostNetwork {
		t.Errorf("%s: no hostNetwork", where)
	}
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		if c.ImagePullPolicy != corev1.PullNever {
			t.Errorf("%s: container %s's imagePullPolicy is %q, want Never (no registry here)", where, c.Name, c.ImagePullPolicy)
		}
		for _, p := range []*corev1.Probe{c.StartupProbe, c.ReadinessProbe, c.LivenessProbe} {
			if p != nil && p.HTTPGet != nil && p.HTTPGet.Host != "127.0.0.1" {
				t.Errorf("%s: container %s probes %q, want 127.0.0.1", where, c.Name, p.HTTPGet.Host)
			}
		}
		if c.Name != "berth" {
			continue
		}
		if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "http" && int(p.ContainerPort) == s.port }) {
			t.Errorf("%s: berth's port http is not %d: %+v", where, s.port, c.Ports)
		}
		env := map[string]string{}
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
		if env["KUBERNETES_SERVICE_HOST"] != k.apiHost || env["KUBERNETES_SERVICE_PORT"] != k.apiPort {
			t.Errorf("%s: berth's KUBERNETES_SERVICE_HOST:PORT is %s:%s, want the API server's %s:%s", where, env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"], k.apiHost, k.apiPort)
		}
	}
}

// applySandbox makes the sandbox pod from the overlay's template, as the
// harness does: named, labelled with the conversation, and (beside the
// harness) mounting the conversation's directory of the workspace.
func applySandbox(ctx context.Context, t *testing.T, k *kubectl, o *overlay, name, conv string) string {
	t.Helper()
	tmpl := o.sandbox
	pod := corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: o.ns,
			Labels:      maps.Clone(tmpl.Template.Labels),
			Annotations: maps.Clone(tmpl.Template.Annotations),
		},
		Spec: *tmpl.Template.Spec.DeepCopy(),
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[enclosure.ConversationLabel] = conv
	for i := range pod.Spec.Containers {
		for j, m := range pod.Spec.Containers[i].VolumeMounts {
			if m.SubPath != "" {
				pod.Spec.Containers[i].VolumeMounts[j].SubPath = conv
			}
		}
	}
	k.run(ctx, t, string(must(yaml.Marshal(pod))), "apply", "-f", "-")
	return name
}

func waitReady(ctx context.Context, t *testing.T, k *kubectl, ns, pod string) {
	t.Helper()
	if _, err := k.try(ctx, "", "-n", ns, "wait", "--for=condition=Ready", "pod/"+pod, "--timeout=3m"); err != nil {
		t.Fatalf("%v\n%s", err, describe(k, ns))
	}
}

func getPod(ctx context.Context, t *testing.T, k *kubectl, ns, name string) corev1.Pod {
	t.Helper()
	var p corev1.Pod
	if err := json.Unmarshal([]byte(k.run(ctx, t, "", "-n", ns, "get", "pod", name, "-o", "json")), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// describe is what a failure shows of the namespace.
func describe(k *kubectl, ns string) string {
	out, err := k.try(context.Background(), "", "-n", ns, "describe", "pods")
	if err != nil {
		return err.Error()
	}
	return out
}

// berthLog is Berth's log in the pod, for a failure.
func berthLog(k *kubectl, ns, pod string) string {
	out, err := k.try(context.Background(), "", "-n", ns, "logs", pod, "-c", "berth", "--tail=50")
	if err != nil {
		return err.Error()
	}
	return "berth's log:\n" + out
}

var forwardingRE = regexp.MustCompile(`Forwarding from (127\.0\.0\.1:\d+) ->`)

// portForward runs kubectl port-forward from a free loopback port of the
// host to port in the pod, and returns the host's address; the forward
// ends at cleanup.
func portForward(ctx context.Context, t *testing.T, k *kubectl, ns, pod string, port int) string {
	t.Helper()
	cmd := exec.Command(k.bin, "-n", ns, "port-forward", "--address", "127.0.0.1", "pod/"+pod, fmt.Sprintf(":%d", port))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := forwardingRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-drained
		_ = cmd.Wait()
	})
	select {
	case a := <-addr:
		return a
	case <-time.After(30 * time.Second):
	case <-ctx.Done():
	}
	t.Fatalf("kubectl port-forward to %s/%s:%d printed no address in 30 s: %s", ns, pod, port, stderr.String())
	return ""
}

// checkAPIServerDialedOnLoopback finds Berth's process of the pod on this
// host (its container's cgroup), and checks that client-go's in-cluster
// configuration took the overlay's KUBERNETES_SERVICE_HOST and PORT: the
// process holds an established TCP connection to the API server at
// 127.0.0.1 (the exec streams of the kernel and the language server stay
// open), and none to any other address.
func checkAPIServerDialedOnLoopback(t *testing.T, k *kubectl, pod corev1.Pod) {
	t.Helper()
	var id string
	for _, st := range pod.Status.InitContainerStatuses {
		if st.Name == "berth" {
			_, id, _ = strings.Cut(st.ContainerID, "://")
		}
	}
	if id == "" {
		t.Fatalf("pod %s has no berth container's id in its status", pod.Name)
	}
	fs, err := procfs.NewFS(procfs.DefaultMountPoint)
	if err != nil {
		t.Fatal(err)
	}
	procs, err := fs.AllProcs()
	if err != nil {
		t.Fatal(err)
	}
	var berth *procfs.Proc
	for i, p := range procs {
		cg, _ := p.Cgroups()
		cmd, _ := p.CmdLine()
		if slices.ContainsFunc(cg, func(c procfs.Cgroup) bool { return strings.Contains(c.Path, id) }) && len(cmd) > 1 && filepath.Base(cmd[0]) == "orchestrator" && cmd[1] == "serve" {
			berth = &procs[i]
		}
	}
	if berth == nil {
		t.Fatalf("no orchestrator serve process in the cgroup of pod %s's berth container %s", pod.Name, id)
	}
	targets, err := berth.FileDescriptorTargets()
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[uint64]bool{}
	for _, target := range targets {
		if n, ok := strings.CutPrefix(target, "socket:["); ok {
			if i, err := strconv.ParseUint(strings.TrimSuffix(n, "]"), 10, 64); err == nil {
				inodes[i] = true
			}
		}
	}
	// hostNetwork: Berth's sockets are in this network namespace's table.
	var toAPI int
	for _, table := range []func() (procfs.NetTCP, error){fs.NetTCP, fs.NetTCP6} {
		lines, err := table()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			const established = 1
			if !inodes[l.Inode] || l.St != established {
				continue
			}
			switch {
			case l.RemAddr.String() == k.apiHost && strconv.FormatUint(l.RemPort, 10) == k.apiPort:
				toAPI++
			case !l.LocalAddr.IsLoopback() || !l.RemAddr.IsLoopback():
				t.Errorf("Berth (pid %d) has a connection from %s:%d to %s:%d: nothing here may leave loopback", berth.PID, l.LocalAddr, l.LocalPort, l.RemAddr, l.RemPort)
			}
		}
	}
	if toAPI == 0 {
		t.Errorf("Berth (pid %d) holds no connection to the API server at %s:%s", berth.PID, k.apiHost, k.apiPort)
	}
	env, err := berth.Environ()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(env, "KUBERNETES_SERVICE_HOST="+k.apiHost) {
		t.Errorf("Berth (pid %d) runs without KUBERNETES_SERVICE_HOST=%s", berth.PID, k.apiHost)
	}
	t.Logf("Berth (pid %d) holds %d connections to the API server at %s:%s", berth.PID, toAPI, k.apiHost, k.apiPort)
}

// podProcesses are the processes on this host in the cgroups of the
// pods, as "pid: command line": the pods' containers, shims excluded.
func podProcesses(t *testing.T, uids []string) []string {
	t.Helper()
	if len(uids) == 0 {
		return nil
	}
	var left []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		left = nil
		procs, err := procfs.AllProcs()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range procs {
			cg, _ := p.Cgroups()
			in := slices.ContainsFunc(cg, func(c procfs.Cgroup) bool {
				return slices.ContainsFunc(uids, func(uid string) bool {
					return strings.Contains(c.Path, uid) || strings.Contains(c.Path, strings.ReplaceAll(uid, "-", "_"))
				})
			})
			if in {
				cmd, _ := p.CmdLine()
				left = append(left, fmt.Sprintf("%d: %s", p.PID, strings.Join(cmd, " ")))
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
	}
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func ptr[T any](v T) *T { return &v }

// replaceBerthContainer replaces Berth's container in the running pod
// without deleting the pod, as a new image of Berth patched into the pod
// does: it tags the image the container runs (berth/berth:dev) with a
// new tag in the cluster's containerd (nothing to pull or import: the
// overlay's imagePullPolicy is Never) and patches the pod's berth
// container to it. On v1.34 the kubelet replaces a native sidecar whose
// image changed in place ("Init container berth definition changed"):
// it runs the preStop hook (orchestrator handoff --pid 1), then starts
// the container anew in the same pod, on the same berth-home emptyDir.
// It waits for the new container to be Ready, checks that the pod is the
// same and that the old container handed off (its log's "handed off"
// line, exit status 0), and returns when the patch was sent. The hook
// has the pod's grace, which the overlay cuts to 2 s: enough for a
// handoff with no call in flight (0.1 s); the shapes keep Kubernetes'
// 30 s, which must exceed runs.handoff_timeout.
func replaceBerthContainer(ctx context.Context, t *testing.T, k *kubectl, s clusterShape, ns, pod, uid string) time.Time {
	t.Helper()
	before := getPod(ctx, t, k, ns, pod)
	index := slices.IndexFunc(before.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == "berth" })
	if index < 0 {
		t.Fatalf("pod %s has no berth init container (a native sidecar in both shapes)", pod)
	}
	old := berthStatus(t, before)
	image := before.Spec.InitContainers[index].Image
	colon := strings.LastIndex(image, ":")
	if colon < 0 || strings.Contains(image[colon:], "/") || strings.Contains(image, "@") {
		t.Fatalf("pod %s's berth container runs image %q, which has no tag to replace", pod, image)
	}
	tagged := image[:colon] + ":replaced-" + strings.TrimPrefix(ns, s.name+"-")
	tagImage(ctx, t, image, tagged)

	patched := time.Now()
	patch := []map[string]any{{"op": "replace", "path": fmt.Sprintf("/spec/initContainers/%d/image", index), "value": tagged}}
	k.run(ctx, t, "", "-n", ns, "patch", "pod", pod, "--type=json", "-p", string(must(json.Marshal(patch))))
	var now corev1.Pod
	var st corev1.ContainerStatus
	for {
		now = getPod(ctx, t, k, ns, pod)
		st = berthStatus(t, now)
		if st.ContainerID != old.ContainerID && st.RestartCount > old.RestartCount && st.Ready {
			break
		}
		if ctx.Err() != nil || time.Since(patched) > 2*time.Minute {
			t.Fatalf("Berth's container in pod %s was not replaced and Ready within 2 minutes of the patch to image %s: its status %+v\n%s", pod, tagged, st, describe(k, ns))
		}
		time.Sleep(100 * time.Millisecond)
	}
	ready := time.Since(patched)
	if string(now.UID) != uid {
		t.Fatalf("pod %s's UID is %s after its berth container's image was patched, was %s: the pod was replaced, not the container", pod, now.UID, uid)
	}
	if st.ImageID != old.ImageID {
		t.Errorf("the new berth container runs image %s, want the old one's %s under the new tag", st.ImageID, old.ImageID)
	}
	term := st.LastTerminationState.Terminated
	if term == nil || term.ExitCode != 0 || term.ContainerID != old.ContainerID {
		t.Errorf("Berth's old container %s ended as %+v, want exit status 0 (a handoff)", old.ContainerID, term)
	}
	prev, err := k.try(ctx, "", "-n", ns, "logs", pod, "-c", "berth", "--previous")
	if err != nil {
		t.Fatal(err)
	}
	handedOff := regexp.MustCompile(`handed off: exiting without ending the runs.* took=(\S+)`).FindStringSubmatch(prev)
	if handedOff == nil {
		t.Fatalf("the old berth container's log has no handoff: its preStop hook did not run, or did not hand off:\n%s", prev)
	}
	t.Logf("%s: Berth's container replaced in pod %s (same UID, restartCount %d -> %d): Ready %s after the patch; the old one handed off in %s",
		s.name, pod, old.RestartCount, st.RestartCount, ready.Round(time.Millisecond), handedOff[1])
	return patched
}

// berthStatus is the status of pod's berth container.
func berthStatus(t *testing.T, pod corev1.Pod) corev1.ContainerStatus {
	t.Helper()
	for _, st := range pod.Status.InitContainerStatuses {
		if st.Name == "berth" {
			return st
		}
	}
	t.Fatalf("pod %s has no status of its berth container", pod.Name)
	return corev1.ContainerStatus{}
}

// tagImage tags image as tagged in the cluster's containerd, in the
// namespace the kubelet's CRI uses (k8s.io), with ctr through the socket
// scripts/kube starts it on ($KUBECONFIG's directory, run/containerd.sock);
// the tag is removed at cleanup.
func tagImage(ctx context.Context, t *testing.T, image, tagged string) {
	t.Helper()
	ctr, err := exec.LookPath("ctr")
	if err != nil {
		t.Fatalf("ctr (containerd's client, of Debian's containerd package; scripts/setup installs it) is not on PATH: %v", err)
	}
	sock := filepath.Join(filepath.Dir(os.Getenv("KUBECONFIG")), "run", "containerd.sock")
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("the cluster's containerd socket: %v (scripts/kube starts it beside the admin kubeconfig, in run/)", err)
	}
	ref := func(name string) string {
		// containerd's name of a Docker Hub image: docker.io/ in front of a
		// name without a registry.
		if strings.Count(strings.Split(name, ":")[0], "/") < 2 {
			return "docker.io/" + name
		}
		return name
	}
	run := func(ctx context.Context, args ...string) error {
		out, err := exec.CommandContext(ctx, ctr, append([]string{"-a", sock, "-n", "k8s.io", "images"}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ctr images %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := run(ctx, "tag", ref(image), ref(tagged)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := run(context.Background(), "rm", ref(tagged)); err != nil {
			t.Error(err)
		}
	})
}
