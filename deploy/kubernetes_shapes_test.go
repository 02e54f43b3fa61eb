package deploy_test

import (
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kustomize "sigs.k8s.io/kustomize/api/types"
)

// apiAccessPath is where client-go's in-cluster configuration reads the
// ServiceAccount's token, the cluster's CA and the namespace.
const apiAccessPath = "/var/run/secrets/kubernetes.io/serviceaccount"

// berthConfig is the part of Berth's effective configuration (what
// "orchestrator config" prints, every key) that the shapes set.
type berthConfig struct {
	Enclosure struct {
		Auto         []string `yaml:"auto"`
		HostFallback bool     `yaml:"host_fallback"`
	} `yaml:"enclosure"`
	Kubernetes struct {
		Kubeconfig      string `yaml:"kubeconfig"`
		Namespace       string `yaml:"namespace"`
		Container       string `yaml:"container"`
		Sidecar         bool   `yaml:"sidecar"`
		WorkspaceVolume struct {
			Name string `yaml:"name"` // the volume's name in the sandbox pod
			Path string `yaml:"path"` // where Berth mounts it; empty: where the sandbox does
		} `yaml:"workspace_volume"`
	} `yaml:"kubernetes"`
}

// berthPod is Berth's container in a pod of a shape, with the
// configuration it is given and its mount of the workspace.
type berthPod struct {
	berth         corev1.Container
	config        berthConfig
	workspace     corev1.Volume // Berth's pod's volume of kubernetes.workspace_volume's name
	workspacePath string        // where Berth mounts it
}

// wantRules is every (API group, resource, verb) the Kubernetes driver
// needs: read the pod (or list the one labelled for "auto"), and open
// an exec or a port-forward, which the WebSocket client opens with a GET
// and the SPDY fallback with a POST (create).
var wantRules = []string{
	"/pods get", "/pods list",
	"/pods/exec create", "/pods/exec get",
	"/pods/portforward create", "/pods/portforward get",
}

// Issue 16 item 6: in both shapes the Role grants exactly the verbs the
// driver uses (nothing that creates, deletes or patches a pod), the
// RoleBinding binds it to the shape's ServiceAccount in the namespace
// the ServiceAccount is in, and the ServiceAccount's token is not
// mounted by default.
func TestRoleGrantsOnlyWhatTheDriverUses(t *testing.T) {
	for _, dir := range shapes {
		s := buildShape(t, dir)
		if sas := boundServiceAccounts(t, s); len(sas) != 1 {
			t.Errorf("%s: the RoleBinding binds %v, want Berth's one ServiceAccount", dir, sas)
		}
	}
}

// boundServiceAccounts checks the shape's Role and RoleBinding and
// returns the ServiceAccounts bound to the Role.
func boundServiceAccounts(t *testing.T, s *shape) []string {
	t.Helper()
	if len(s.roles) != 1 || len(s.bindings) != 1 {
		t.Fatalf("%s has %d Roles and %d RoleBindings, want one of each", s.dir, len(s.roles), len(s.bindings))
	}
	role, binding := s.roles[0], s.bindings[0]
	var got []string
	for _, r := range role.Rules {
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Errorf("%s: Role %s names resources or URLs: %+v", s.dir, role.Name, r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					got = append(got, g+"/"+res+" "+v)
				}
			}
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, wantRules) {
		t.Errorf("%s: Role %s grants %v, want exactly %v", s.dir, role.Name, got, wantRules)
	}
	if want := (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}); binding.RoleRef != want {
		t.Errorf("%s: RoleBinding %s refers to %+v, want %+v", s.dir, binding.Name, binding.RoleRef, want)
	}
	var sas []string
	for _, sub := range binding.Subjects {
		i := slices.IndexFunc(s.serviceAccounts, func(sa corev1.ServiceAccount) bool { return sa.Name == sub.Name })
		switch {
		case sub.Kind != rbacv1.ServiceAccountKind || i < 0:
			t.Errorf("%s: RoleBinding %s binds %s %s, not a ServiceAccount of the shape", s.dir, binding.Name, sub.Kind, sub.Name)
		case sub.Namespace != s.serviceAccounts[i].Namespace:
			t.Errorf("%s: RoleBinding %s binds ServiceAccount %s in namespace %q, but it is in %q: change the subject's namespace with the kustomization's",
				s.dir, binding.Name, sub.Name, sub.Namespace, s.serviceAccounts[i].Namespace)
		default:
			sas = append(sas, sub.Name)
			if a := s.serviceAccounts[i].AutomountServiceAccountToken; a == nil || *a {
				t.Errorf("%s: ServiceAccount %s's token is mounted into every container of its pods: set automountServiceAccountToken: false", s.dir, sub.Name)
			}
		}
	}
	return sas
}

// checkBerth checks Berth's container in a pod spec of the shape: a
// native sidecar of the image the kustomization sets, as non-root,
// knowing its own pod's name and namespace,
// running as the ServiceAccount the RoleBinding binds (what it grants is
// TestRoleGrantsOnlyWhatTheDriverUses's), the only
// container with that account's token, configured from a ConfigMap of
// the shape that keeps the image's settings and sets the driver's keys.
// bin is the orchestrator, which loads the configuration.
func checkBerth(t *testing.T, bin string, s *shape, where string, spec corev1.PodSpec) berthPod {
	t.Helper()
	berth, ok := containerNamed(spec.InitContainers, "berth")
	if !ok {
		t.Fatalf("%s has no berth init container (native sidecar)", where)
	}
	p := berthPod{berth: berth}
	if rp := p.berth.RestartPolicy; rp == nil || *rp != corev1.ContainerRestartPolicyAlways {
		t.Errorf("%s: berth is not a native sidecar (restartPolicy: Always)", where)
	}
	ki := slices.IndexFunc(s.kustomization.Images, func(im kustomize.Image) bool { return im.Name == "berth/berth" })
	if ki < 0 {
		t.Errorf("%s: the kustomization sets no berth/berth image", s.dir)
	} else if want := "berth/berth:" + s.kustomization.Images[ki].NewTag; p.berth.Image != want {
		t.Errorf("%s: berth's image is %s, want %s (the kustomization's)", where, p.berth.Image, want)
	}
	nonRoot := spec.SecurityContext != nil && spec.SecurityContext.RunAsNonRoot != nil && *spec.SecurityContext.RunAsNonRoot
	if sc := p.berth.SecurityContext; sc != nil && sc.RunAsNonRoot != nil {
		nonRoot = *sc.RunAsNonRoot
	}
	if !nonRoot {
		t.Errorf("%s: berth may run as root (runAsNonRoot)", where)
	}
	if sc := p.berth.SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s: berth may escalate privileges", where)
	}

	bound := slices.ContainsFunc(s.bindings, func(b rbacv1.RoleBinding) bool {
		return slices.ContainsFunc(b.Subjects, func(sub rbacv1.Subject) bool {
			return sub.Kind == rbacv1.ServiceAccountKind && sub.Name == spec.ServiceAccountName
		})
	})
	if !bound {
		t.Errorf("%s runs as ServiceAccount %q, which no RoleBinding binds", where, spec.ServiceAccountName)
	}
	if a := spec.AutomountServiceAccountToken; a == nil || *a {
		t.Errorf("%s mounts the ServiceAccount's token into every container: set automountServiceAccountToken: false and project it into berth only", where)
	}
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		tokens := apiAccessMounts(spec, c)
		switch {
		case c.Name == p.berth.Name && !slices.Equal(tokens, []string{apiAccessPath}):
			t.Errorf("%s: berth mounts the ServiceAccount's token at %v, want at %s, where in-cluster configuration reads it", where, tokens, apiAccessPath)
		case c.Name != p.berth.Name && len(tokens) > 0:
			t.Errorf("%s: container %s mounts Berth's API token at %v: only berth may exec into pods", where, c.Name, tokens)
		}
	}

	for name, field := range map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"} {
		i := slices.IndexFunc(p.berth.Env, func(e corev1.EnvVar) bool { return e.Name == name })
		if i < 0 || p.berth.Env[i].ValueFrom == nil || p.berth.Env[i].ValueFrom.FieldRef == nil || p.berth.Env[i].ValueFrom.FieldRef.FieldPath != field {
			t.Errorf("%s: berth's $%s is not the downward API's %s: the driver finds its own pod by it", where, name, field)
		}
	}

	p.config = berthConfigOf(t, bin, s, where, spec, p.berth)
	k := p.config.Kubernetes
	if !slices.Equal(p.config.Enclosure.Auto, []string{"kubernetes"}) {
		t.Errorf("%s: enclosure.auto is %v, want [kubernetes]", where, p.config.Enclosure.Auto)
	}
	if p.config.Enclosure.HostFallback {
		t.Errorf("%s: enclosure.host_fallback is not false: a conversation without a pod would run in Berth's own container", where)
	}
	if k.Kubeconfig != "" {
		t.Errorf("%s: kubernetes.kubeconfig is %q, but the pod gives Berth its in-cluster token", where, k.Kubeconfig)
	}
	if k.Namespace != "" && k.Namespace != s.kustomization.Namespace {
		t.Errorf("%s: kubernetes.namespace is %q, but the Role covers %q", where, k.Namespace, s.kustomization.Namespace)
	}
	wv := k.WorkspaceVolume
	v := volumeOf(spec, wv.Name)
	if v == nil {
		t.Fatalf("%s: kubernetes.workspace_volume %q is not a volume of Berth's pod", where, wv.Name)
	}
	p.workspace = *v
	m, ok := mountOf(p.berth, wv.Name)
	if !ok || m.SubPath != "" || m.ReadOnly {
		t.Fatalf("%s: berth does not mount the whole workspace volume %q read-write: %+v", where, wv.Name, m)
	}
	p.workspacePath = m.MountPath
	if wv.Path != "" && wv.Path != p.workspacePath {
		t.Errorf("%s: kubernetes.workspace_volume's path is %s, but berth mounts %s at %s", where, wv.Path, wv.Name, p.workspacePath)
	}
	if !slices.ContainsFunc(p.berth.Ports, func(cp corev1.ContainerPort) bool { return cp.Name == "http" && cp.ContainerPort == 7070 }) {
		t.Errorf("%s: berth has no port http 7070 (rpc.listen)", where)
	}
	return p
}

// berthConfigOf finds the file berth's --config names in the ConfigMap
// mounted there, has the orchestrator load it (strictly: a key it does
// not know, or a value it refuses, fails) and returns the effective
// configuration; the file must keep every setting of the image's own
// file, which the mount hides.
func berthConfigOf(t *testing.T, bin string, s *shape, where string, spec corev1.PodSpec, berth corev1.Container) berthConfig {
	t.Helper()
	i := slices.Index(berth.Args, "--config")
	if i < 0 || i+1 >= len(berth.Args) {
		t.Fatalf("%s: berth's args %v name no --config", where, berth.Args)
	}
	file := berth.Args[i+1]
	var cm *corev1.ConfigMapVolumeSource
	for _, m := range berth.VolumeMounts {
		if m.MountPath == filepath.Dir(file) {
			if v := volumeOf(spec, m.Name); v != nil {
				cm = v.ConfigMap
			}
		}
	}
	if cm == nil {
		t.Fatalf("%s: berth's --config %s is not in a ConfigMap it mounts", where, file)
	}
	text, ok := s.configMaps[cm.Name].Data[filepath.Base(file)]
	if !ok {
		t.Fatalf("%s: ConfigMap %s of the shape has no %s, berth's --config", where, cm.Name, filepath.Base(file))
	}
	copied := filepath.Join(t.TempDir(), filepath.Base(file))
	writeFile(t, copied, text)
	out, err := exec.Command(bin, "config", "--config", copied).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("%s: Berth refuses ConfigMap %s's %s: %v\n%s", where, cm.Name, filepath.Base(file), err, stderr)
	}
	var c berthConfig
	if err := yaml.Unmarshal(out, &c); err != nil {
		t.Fatalf("orchestrator config printed what is not YAML: %v\n%s", err, out)
	}

	var image, got map[string]any
	readYAML(t, "../images/berth/berth.yaml", &image, false)
	if err := yaml.Unmarshal([]byte(text), &got); err != nil {
		t.Fatal(err)
	}
	for key, want := range image {
		if !reflect.DeepEqual(got[key], want) {
			t.Errorf("%s: ConfigMap %s hides images/berth/berth.yaml, but its %s is\n%v\nnot the image's\n%v", where, cm.Name, key, got[key], want)
		}
	}
	return c
}

// apiAccessMounts are the paths where c mounts a volume that holds a
// ServiceAccount token, or anything at apiAccessPath.
func apiAccessMounts(spec corev1.PodSpec, c corev1.Container) []string {
	var paths []string
	for _, m := range c.VolumeMounts {
		v := volumeOf(spec, m.Name)
		token := v != nil && v.Projected != nil && slices.ContainsFunc(v.Projected.Sources, func(p corev1.VolumeProjection) bool { return p.ServiceAccountToken != nil })
		if token || m.MountPath == apiAccessPath {
			paths = append(paths, m.MountPath)
		}
	}
	return paths
}

func volumeOf(spec corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

func mountOf(c corev1.Container, volume string) (corev1.VolumeMount, bool) {
	for _, m := range c.VolumeMounts {
		if m.Name == volume {
			return m, true
		}
	}
	return corev1.VolumeMount{}, false
}

func containerNamed(cs []corev1.Container, name string) (corev1.Container, bool) {
	i := slices.IndexFunc(cs, func(c corev1.Container) bool { return c.Name == name })
	if i < 0 {
		return corev1.Container{}, false
	}
	return cs[i], true
}

// Issue 16 item 6, the shape beside the harness: Berth in the harness's
// pod reaches the sandbox pods through the API server (not a sidecar),
// its workspace volume is a ReadWriteMany claim of the shape that the
// harness mounts at Berth's path and that each sandbox pod mounts (its
// conversation's directory of it) in the container the configuration
// names; the sandbox pods run no Berth and get no API token; the Service
// and ServiceMonitor reach Berth's port.
func TestKubernetesShapeBesideTheHarness(t *testing.T) {
	bin := buildBerth(t)
	s := buildShape(t, "kubernetes")
	if len(s.deployments) != 1 || len(s.templates) != 1 {
		t.Fatalf("%s builds %d Deployments and %d PodTemplates, want the harness's and the sandbox's", s.dir, len(s.deployments), len(s.templates))
	}
	d := s.deployments[0]
	where := s.dir + ": Deployment " + d.Name
	p := checkBerth(t, bin, s, where, d.Spec.Template.Spec)
	k := p.config.Kubernetes
	if k.Sidecar {
		t.Errorf("%s: kubernetes.sidecar is true, but Berth is not in the sandbox pods", where)
	}
	if p.workspace.PersistentVolumeClaim == nil {
		t.Fatalf("%s: the workspace volume %s is not a PersistentVolumeClaim the sandbox pods can mount too", where, p.workspace.Name)
	}
	claimName := p.workspace.PersistentVolumeClaim.ClaimName
	if claim, ok := s.claims[claimName]; !ok || !slices.Contains(claim.Spec.AccessModes, corev1.ReadWriteMany) {
		t.Errorf("%s: the workspace claim %s is not a ReadWriteMany claim of the shape (%v): pods on other nodes must mount it at once", where, claimName, claim.Spec.AccessModes)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if m, _ := mountOf(c, p.workspace.Name); m.MountPath != p.workspacePath || m.SubPath != "" {
			t.Errorf("%s: container %s mounts the workspace at %q (subPath %q), berth at %q: run/start's workdir must be the same path in both", where, c.Name, m.MountPath, m.SubPath, p.workspacePath)
		}
	}

	tmpl := s.templates[0]
	where = s.dir + ": PodTemplate " + tmpl.Name
	spec := tmpl.Template.Spec
	if _, ok := containerNamed(slices.Concat(spec.InitContainers, spec.Containers), "berth"); ok {
		t.Errorf("%s runs a Berth of its own: in this shape Berth is beside the harness", where)
	}
	if a := spec.AutomountServiceAccountToken; a == nil || *a || spec.ServiceAccountName != "" {
		t.Errorf("%s may get an API token (serviceAccountName %q, automount %v): the sandbox runs the model's code", where, spec.ServiceAccountName, a)
	}
	sandbox, ok := containerNamed(spec.Containers, k.Container)
	if !ok {
		t.Fatalf("%s has no container %q (kubernetes.container)", where, k.Container)
	}
	// The driver finds the sandbox's mount by the volume's name.
	if v := volumeOf(spec, k.WorkspaceVolume.Name); v == nil || v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != claimName {
		t.Errorf("%s: its volume %s (kubernetes.workspace_volume) is %+v, not the claim %s Berth mounts", where, k.WorkspaceVolume.Name, v, claimName)
	}
	switch m, ok := mountOf(sandbox, k.WorkspaceVolume.Name); {
	case !ok:
		t.Errorf("%s: container %s does not mount the workspace volume %s, which Berth mounts at %s", where, k.Container, k.WorkspaceVolume.Name, p.workspacePath)
	case m.SubPath == "":
		t.Errorf("%s mounts the whole workspace claim at %s: each sandbox must see its conversation's directory only (subPath)", where, m.MountPath)
	case k.WorkspaceVolume.Path == "" && m.MountPath != p.workspacePath:
		t.Errorf("%s mounts the workspace at %s, Berth at %s, and kubernetes.workspace_volume has no path: the driver would take the sandbox's path for Berth's", where, m.MountPath, p.workspacePath)
	}

	if len(s.services) != 1 || len(s.serviceMonitors) != 1 {
		t.Fatalf("%s builds %d Services and %d ServiceMonitors, want one of each", s.dir, len(s.services), len(s.serviceMonitors))
	}
	svc, sm := s.services[0], s.serviceMonitors[0]
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("Service %s selects %v, not the Deployment's pods %v", svc.Name, svc.Spec.Selector, d.Spec.Template.Labels)
	}
	for _, port := range svc.Spec.Ports {
		if !slices.ContainsFunc(p.berth.Ports, func(cp corev1.ContainerPort) bool { return cp.Name == port.TargetPort.String() }) {
			t.Errorf("Service %s targets port %s, which berth does not name", svc.Name, port.TargetPort.String())
		}
	}
	if sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector); err != nil || !sel.Matches(labels.Set(svc.Labels)) {
		t.Errorf("ServiceMonitor %s selects %v, not Service %s (%v): %v", sm.Name, sm.Spec.Selector, svc.Name, svc.Labels, err)
	}
	if svc.Name != "berth" {
		t.Errorf("the Service is %s: the scrape job takes its name, and the alerts watch job=\"berth\"", svc.Name)
	}
}

// Issue 16 item 6, the sidecar shape: each sandbox pod runs Berth as a
// native sidecar configured as one (kubernetes.sidecar: true), in the
// pod whose container kubernetes.container names, sharing the pod's
// workspace volume with it at the same path; the PodMonitor scrapes
// every such Berth under the job the alerts watch.
func TestKubernetesShapeSidecarInEachSandboxPod(t *testing.T) {
	bin := buildBerth(t)
	s := buildShape(t, "kubernetes/sidecar")
	if len(s.deployments) != 0 || len(s.templates) != 1 {
		t.Fatalf("%s builds %d Deployments and %d PodTemplates, want only the sandbox pod's template", s.dir, len(s.deployments), len(s.templates))
	}
	tmpl := s.templates[0]
	where := s.dir + ": PodTemplate " + tmpl.Name
	spec := tmpl.Template.Spec
	p := checkBerth(t, bin, s, where, spec)
	k := p.config.Kubernetes
	if !k.Sidecar {
		t.Errorf("%s: kubernetes.sidecar is not true: Berth would port-forward through the API server to its own pod", where)
	}
	sandbox, ok := containerNamed(spec.Containers, k.Container)
	if !ok {
		t.Fatalf("%s has no container %q (kubernetes.container)", where, k.Container)
	}
	if m, _ := mountOf(sandbox, p.workspace.Name); m.MountPath != p.workspacePath || m.SubPath != "" {
		t.Errorf("%s: container %s mounts the workspace %s at %q (subPath %q), berth at %q: the workdir must be the same path in both",
			where, sandbox.Name, p.workspace.Name, m.MountPath, m.SubPath, p.workspacePath)
	}

	if len(s.podMonitors) != 1 {
		t.Fatalf("%s builds %d PodMonitors, want one", s.dir, len(s.podMonitors))
	}
	pm := s.podMonitors[0]
	podLabels := labels.Set(tmpl.Template.Labels)
	if sel, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector); err != nil || !sel.Matches(podLabels) {
		t.Errorf("PodMonitor %s selects %v, not the sandbox pods %v: %v", pm.Name, pm.Spec.Selector, podLabels, err)
	}
	if job := podLabels[pm.Spec.JobLabel]; pm.Spec.JobLabel == "" || job != "berth" {
		t.Errorf("PodMonitor %s names the job after label %q, %q on the pods: the alerts watch job=\"berth\"", pm.Name, pm.Spec.JobLabel, job)
	}
	for _, e := range pm.Spec.PodMetricsEndpoints {
		if e.Port == nil || !slices.ContainsFunc(p.berth.Ports, func(cp corev1.ContainerPort) bool { return cp.Name == *e.Port }) {
			t.Errorf("PodMonitor %s scrapes port %v, which berth does not name", pm.Name, e.Port)
		}
	}
}
