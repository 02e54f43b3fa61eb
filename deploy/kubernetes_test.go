package deploy_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kustomize "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"
)

// decodeStrict decodes a manifest into its Go type; a field the type
// does not have (a typo, a field of another version) is an error.
func decodeStrict(t *testing.T, file string, into any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// Issue 15 item 5: every manifest of deploy/kubernetes decodes strictly
// into its kind's Go type (core kinds with k8s.io/api, the monitoring
// kinds with prometheus-operator's, the kustomization with kustomize's),
// the kustomization lists exactly the manifests, and the PrometheusRule's
// groups equal deploy/prometheus's rules.
func TestIssue15Item5KubernetesManifestsDecodeStrictly(t *testing.T) {
	var k kustomize.Kustomization
	decodeStrict(t, "kubernetes/kustomization.yaml", &k)
	if k.Kind != kustomize.KustomizationKind || k.APIVersion != kustomize.KustomizationVersion {
		t.Errorf("kustomization.yaml is %s %s, want %s %s", k.APIVersion, k.Kind, kustomize.KustomizationVersion, kustomize.KustomizationKind)
	}
	files, _ := filepath.Glob("kubernetes/*.yaml")
	var manifests []string
	for _, f := range files {
		if filepath.Base(f) != "kustomization.yaml" {
			manifests = append(manifests, filepath.Base(f))
		}
	}
	res := slices.Clone(k.Resources)
	slices.Sort(res)
	if !slices.Equal(res, manifests) {
		t.Errorf("kustomization resources %v, want every manifest: %v", res, manifests)
	}

	kinds := map[string]bool{}
	for _, m := range manifests {
		file := filepath.Join("kubernetes", m)
		var tm metav1.TypeMeta
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, &tm); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		kinds[tm.Kind] = true
		switch tm.APIVersion + " " + tm.Kind {
		case "apps/v1 Deployment":
			var d appsv1.Deployment
			decodeStrict(t, file, &d)
			checkSidecar(t, d, k)
		case "v1 Service":
			var s corev1.Service
			decodeStrict(t, file, &s)
		case "monitoring.coreos.com/v1 ServiceMonitor":
			var s monitoringv1.ServiceMonitor
			decodeStrict(t, file, &s)
		case "monitoring.coreos.com/v1 PodMonitor":
			var p monitoringv1.PodMonitor
			decodeStrict(t, file, &p)
		case "monitoring.coreos.com/v1 PrometheusRule":
			var r monitoringv1.PrometheusRule
			decodeStrict(t, file, &r)
			got, want := operatorGroups(r.Spec.Groups), fileGroups(loadRules(t))
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s's groups differ from %s's:\n got %+v\nwant %+v", file, rulesFile, got, want)
			}
		default:
			t.Errorf("%s: no test decodes %s %s", file, tm.APIVersion, tm.Kind)
		}
	}
	for _, kind := range []string{"Deployment", "Service", "ServiceMonitor", "PrometheusRule"} {
		if !kinds[kind] {
			t.Errorf("deploy/kubernetes has no %s", kind)
		}
	}
}

// checkSidecar checks the Berth sidecar: a native sidecar running the
// image the kustomization sets, as non-root, sharing the workspace with
// the harness at the same path.
func checkSidecar(t *testing.T, d appsv1.Deployment, k kustomize.Kustomization) {
	t.Helper()
	spec := d.Spec.Template.Spec
	i := slices.IndexFunc(spec.InitContainers, func(c corev1.Container) bool { return c.Name == "berth" })
	if i < 0 {
		t.Fatalf("the Deployment has no berth init container (native sidecar)")
	}
	berth := spec.InitContainers[i]
	if berth.RestartPolicy == nil || *berth.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("berth is not a native sidecar (restartPolicy: Always)")
	}
	if !slices.ContainsFunc(k.Images, func(im kustomize.Image) bool { return strings.HasPrefix(berth.Image, im.Name+":") }) {
		t.Errorf("berth's image %s is not one the kustomization sets (%v)", berth.Image, k.Images)
	}
	if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("the pod does not require a non-root user")
	}
	if sc := berth.SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("berth may escalate privileges")
	}
	mountOf := func(c corev1.Container, vol string) string {
		for _, m := range c.VolumeMounts {
			if m.Name == vol {
				return m.MountPath
			}
		}
		return ""
	}
	for _, c := range spec.Containers {
		if p := mountOf(c, "workspace"); p == "" || p != mountOf(berth, "workspace") {
			t.Errorf("container %s mounts the workspace at %q, berth at %q: run/start's workdir must be the same path in both", c.Name, p, mountOf(berth, "workspace"))
		}
	}
}

// rule is a rule as both formats carry it, for comparing them.
type rule struct {
	Record, Alert, Expr, For string
	Labels, Annotations      map[string]string
}

type group struct {
	Name     string
	Interval string
	Rules    []rule
}

func duration(t string) string {
	if t == "" || t == "0s" {
		return ""
	}
	d, err := model.ParseDuration(t)
	if err != nil {
		return "invalid " + t
	}
	return d.String()
}

func emptyNil(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

func fileGroups(g *rulefmt.RuleGroups) []group {
	var out []group
	for _, rg := range g.Groups {
		gr := group{Name: rg.Name, Interval: duration(rg.Interval.String())}
		for _, r := range rg.Rules {
			gr.Rules = append(gr.Rules, rule{r.Record, r.Alert, strings.TrimSpace(r.Expr), duration(r.For.String()), emptyNil(r.Labels), emptyNil(r.Annotations)})
		}
		out = append(out, gr)
	}
	return out
}

func operatorGroups(gs []monitoringv1.RuleGroup) []group {
	var out []group
	for _, rg := range gs {
		gr := group{Name: rg.Name}
		if rg.Interval != nil {
			gr.Interval = duration(string(*rg.Interval))
		}
		for _, r := range rg.Rules {
			var f string
			if r.For != nil {
				f = duration(string(*r.For))
			}
			gr.Rules = append(gr.Rules, rule{r.Record, r.Alert, strings.TrimSpace(r.Expr.String()), f, emptyNil(r.Labels), emptyNil(r.Annotations)})
		}
		out = append(out, gr)
	}
	return out
}

// Issue 15 item 5: the systemd unit is hardened and gets its token as a
// credential and its home as a state directory.
func TestIssue15Item5SystemdUnitIsHardened(t *testing.T) {
	f, err := os.Open("systemd/berth.service")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	keys := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			keys[k] = v
		}
	}
	for k, want := range map[string]string{
		"NoNewPrivileges": "yes", "ProtectSystem": "strict", "StateDirectory": "berth",
		"LoadCredential": "token:/etc/berth/token", "PrivateTmp": "yes", "CapabilityBoundingSet": "",
	} {
		if got, ok := keys[k]; !ok || got != want {
			t.Errorf("berth.service: %s=%q, want %q", k, got, want)
		}
	}
	if !strings.Contains(keys["ExecStart"], "--token-file ${CREDENTIALS_DIRECTORY}/token") {
		t.Errorf("berth.service does not pass the token credential: ExecStart=%s", keys["ExecStart"])
	}
	// systemd's own check of the unit, with an ExecStart that exists here.
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatalf("systemd-analyze is not on PATH (Debian's systemd package): %v", err)
	}
	unit, err := os.ReadFile("systemd/berth.service")
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "berth.service")
	if err := os.WriteFile(copyPath, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/orchestrator", "/bin/true")), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(analyze, "verify", copyPath).CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
