package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/berth-dev/berth/enclosure"
)

// clusterPod is the real cluster's pod: its name in namespace default,
// as run/start names it.
const clusterPod = "bench-enclosure"

// startClusterPod makes, in the real cluster kubeconfig reaches
// (scripts/kube start makes one), a pod as a harness makes one:
// hostNetwork, the image the cluster's containerd holds (scripts/kube
// imports berth/full:dev, pulled never), the workdirs subPaths of a
// hostPath volume of the host's root (kubernetes.workspace_volume path
// /, as for the stand-in), the module cache read-only beside, labelled
// and sleeping. It waits until the pod runs, and returns its id
// (namespace/name) and a function that deletes it and waits until it is
// gone.
func startClusterPod(kubeconfig, image, root, work, modcache string) (string, func(), error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return "", nil, fmt.Errorf("the real cluster's kubeconfig %s: %w (scripts/kube start makes a cluster and prints KUBECONFIG=<path>)", kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pods := cs.CoreV1().Pods("default")
	end := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		zero := int64(0)
		_ = pods.Delete(ctx, clusterPod, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		for ctx.Err() == nil {
			if _, err := pods.Get(ctx, clusterPod, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	end() // one an interrupted benchmark left
	hostPath := func(p string) corev1.VolumeSource {
		dir := corev1.HostPathDirectory
		return corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: p, Type: &dir}}
	}
	grace := int64(1)
	no := false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: clusterPod, Labels: map[string]string{enclosure.ConversationLabel: "bench-enclosure"}},
		Spec: corev1.PodSpec{
			HostNetwork: true, DNSPolicy: corev1.DNSDefault, EnableServiceLinks: &no,
			AutomountServiceAccountToken: &no, TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "sandbox", Image: image, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sleep", "infinity"},
				Env:     []corev1.EnvVar{{Name: "GOPROXY", Value: "off"}, {Name: "GOFLAGS", Value: "-mod=readonly"}},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "workspace", MountPath: workspace, SubPath: strings.TrimPrefix(root, "/")},
					{Name: "workspace", MountPath: "/bench", SubPath: strings.TrimPrefix(work, "/")},
					{Name: "modcache", MountPath: "/root/go/pkg/mod", ReadOnly: true},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "workspace", VolumeSource: hostPath("/")},
				{Name: "modcache", VolumeSource: hostPath(modcache)},
			},
		},
	}
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return "", nil, fmt.Errorf("making the real cluster's pod (is the cluster up? scripts/kube start): %w", err)
	}
	for {
		p, err := pods.Get(ctx, clusterPod, metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning {
			return "default/" + clusterPod, end, nil
		}
		if ctx.Err() != nil {
			end()
			why := ""
			if p != nil {
				for _, s := range p.Status.ContainerStatuses {
					if s.State.Waiting != nil {
						why = fmt.Sprintf(": %s: %s", s.State.Waiting.Reason, s.State.Waiting.Message)
					}
				}
			}
			return "", nil, fmt.Errorf("the real cluster's pod did not run in 3 minutes%s (is %s imported into the cluster's containerd? scripts/kube start imports it)", why, image)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
