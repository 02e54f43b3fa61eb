package deploy_test

import (
	"bufio"
	"io/fs"
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
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	kustomize "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
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

// Issue 15 item 5, and issue 16 item 6 for the sidecar shape and the
// RBAC: every manifest under deploy/kubernetes decodes strictly into its
// kind's Go type (core and RBAC kinds with k8s.io/api, the monitoring
// kinds with prometheus-operator's, kustomizations with kustomize's),
// every manifest is a resource of a kustomization, each shape builds
// with kustomize, and the PrometheusRule's groups equal
// deploy/prometheus's rules. Berth's container in each shape is checked
// by checkBerth (kubernetes_shapes_test.go).
func TestKubernetesManifestsDecodeStrictly(t *testing.T) {
	var manifests, listed []string
	err := filepath.WalkDir("kubernetes", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" {
			return err
		}
		if filepath.Base(path) != "kustomization.yaml" {
			manifests = append(manifests, path)
			return nil
		}
		var k kustomize.Kustomization
		decodeStrict(t, path, &k)
		if k.Kind != kustomize.KustomizationKind || k.APIVersion != kustomize.KustomizationVersion {
			t.Errorf("%s is %s %s, want %s %s", path, k.APIVersion, k.Kind, kustomize.KustomizationVersion, kustomize.KustomizationKind)
		}
		for _, r := range k.Resources {
			r = filepath.Join(filepath.Dir(path), r)
			if filepath.Ext(r) == ".yaml" {
				listed = append(listed, r)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(listed)
	if !slices.Equal(listed, manifests) {
		t.Errorf("the kustomizations list %v, want every manifest once: %v", listed, manifests)
	}
	kindsFound := map[string]bool{}
	for _, m := range manifests {
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		if o := decodeKind(t, m, b); o != nil {
			kindsFound[reflect.TypeOf(o).Name()] = true
		}
	}
	for _, kind := range []string{"Deployment", "Service", "ServiceMonitor", "PodMonitor", "PrometheusRule",
		"ServiceAccount", "Role", "RoleBinding", "ConfigMap", "PersistentVolumeClaim", "PodTemplate"} {
		if !kindsFound[kind] {
			t.Errorf("deploy/kubernetes has no %s", kind)
		}
	}
	for _, dir := range shapes {
		for _, r := range buildShape(t, dir).rules {
			got, want := operatorGroups(r.Spec.Groups), fileGroups(loadRules(t))
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: the PrometheusRule's groups differ from %s's:\n got %+v\nwant %+v", dir, rulesFile, got, want)
			}
		}
	}
}

// shapes are the two ways to deploy Berth on Kubernetes: beside the
// harness, reaching the sandbox pods through the API server, and as a
// sidecar in each sandbox pod.
var shapes = []string{"kubernetes", "kubernetes/sidecar"}

// shape is what a kustomization builds, each object decoded strictly.
type shape struct {
	dir             string
	kustomization   kustomize.Kustomization
	deployments     []appsv1.Deployment
	templates       []corev1.PodTemplate
	services        []corev1.Service
	serviceAccounts []corev1.ServiceAccount
	configMaps      map[string]corev1.ConfigMap
	claims          map[string]corev1.PersistentVolumeClaim
	roles           []rbacv1.Role
	bindings        []rbacv1.RoleBinding
	serviceMonitors []monitoringv1.ServiceMonitor
	podMonitors     []monitoringv1.PodMonitor
	rules           []monitoringv1.PrometheusRule
}

// buildShape builds dir as "kubectl apply -k" would (kustomize's own
// builder, so bases, the namespace and the image tag are applied) and
// decodes every object it makes strictly.
func buildShape(t *testing.T, dir string) *shape {
	t.Helper()
	s := &shape{dir: dir, configMaps: map[string]corev1.ConfigMap{}, claims: map[string]corev1.PersistentVolumeClaim{}}
	decodeStrict(t, filepath.Join(dir, "kustomization.yaml"), &s.kustomization)
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	for _, r := range m.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		where := dir + ": " + r.GetKind() + " " + r.GetName()
		if ns := r.GetNamespace(); ns != s.kustomization.Namespace {
			t.Errorf("%s is in namespace %q, want the kustomization's %q", where, ns, s.kustomization.Namespace)
		}
		switch o := decodeKind(t, where, b).(type) {
		case appsv1.Deployment:
			s.deployments = append(s.deployments, o)
		case corev1.PodTemplate:
			s.templates = append(s.templates, o)
		case corev1.Service:
			s.services = append(s.services, o)
		case corev1.ServiceAccount:
			s.serviceAccounts = append(s.serviceAccounts, o)
		case corev1.ConfigMap:
			s.configMaps[r.GetName()] = o
		case corev1.PersistentVolumeClaim:
			s.claims[r.GetName()] = o
		case rbacv1.Role:
			s.roles = append(s.roles, o)
		case rbacv1.RoleBinding:
			s.bindings = append(s.bindings, o)
		case monitoringv1.ServiceMonitor:
			s.serviceMonitors = append(s.serviceMonitors, o)
		case monitoringv1.PodMonitor:
			s.podMonitors = append(s.podMonitors, o)
		case monitoringv1.PrometheusRule:
			s.rules = append(s.rules, o)
		}
	}
	return s
}

// kinds decodes each kind the manifests have strictly into its Go type.
var kinds = map[string]func(t *testing.T, where string, b []byte) any{
	"apps/v1 Deployment":                       decodeAs[appsv1.Deployment],
	"v1 Service":                               decodeAs[corev1.Service],
	"v1 ServiceAccount":                        decodeAs[corev1.ServiceAccount],
	"v1 ConfigMap":                             decodeAs[corev1.ConfigMap],
	"v1 PersistentVolumeClaim":                 decodeAs[corev1.PersistentVolumeClaim],
	"v1 PodTemplate":                           decodeAs[corev1.PodTemplate],
	"rbac.authorization.k8s.io/v1 Role":        decodeAs[rbacv1.Role],
	"rbac.authorization.k8s.io/v1 RoleBinding": decodeAs[rbacv1.RoleBinding],
	"monitoring.coreos.com/v1 ServiceMonitor":  decodeAs[monitoringv1.ServiceMonitor],
	"monitoring.coreos.com/v1 PodMonitor":      decodeAs[monitoringv1.PodMonitor],
	"monitoring.coreos.com/v1 PrometheusRule":  decodeAs[monitoringv1.PrometheusRule],
}

func decodeAs[T any](t *testing.T, where string, b []byte) any { return into[T](t, where, b) }

// decodeKind decodes a manifest strictly into the Go type of its
// apiVersion and kind (a value of that type); a kind kinds does not know
// fails, and is nil.
func decodeKind(t *testing.T, where string, b []byte) any {
	t.Helper()
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(b, &tm); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	decode, ok := kinds[tm.APIVersion+" "+tm.Kind]
	if !ok {
		t.Errorf("%s: no test decodes %s %s", where, tm.APIVersion, tm.Kind)
		return nil
	}
	return decode(t, where, b)
}

// into decodes b strictly into a T.
func into[T any](t *testing.T, where string, b []byte) T {
	t.Helper()
	var v T
	if err := yaml.UnmarshalStrict(b, &v); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	return v
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
func TestSystemdUnitIsHardened(t *testing.T) {
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
	// Issue 29 item 1: kernels outlive a crash, for the Berth Restart=
	// starts on the same state directory; systemd must not kill them.
	if !strings.Contains(keys["ExecStart"], "--state-dir ${STATE_DIRECTORY}/state") || keys["KillMode"] != "process" {
		t.Errorf("berth.service: ExecStart=%s, KillMode=%s; want --state-dir ${STATE_DIRECTORY}/state and KillMode=process", keys["ExecStart"], keys["KillMode"])
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
