package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relayexec"
	"github.com/berth-dev/berth/internal/boundedio"
)

// pod is one attached container of a pod: the enclosure (the
// relayed-exec core's Container, which it embeds) and the API server's
// side of it.
type pod struct {
	*relayexec.Container
	d         *Driver
	api       *api
	ns, name  string
	container string
	sidecar   bool // Berth is in the same pod: Dial uses loopback

	protocol atomic.Pointer[string] // which carried the last exec to end
}

var _ relayexec.Engine = (*pod)(nil)

// key is what Attach takes back: namespace/pod/container.
func (p *pod) key() string { return p.ns + "/" + p.name + "/" + p.container }

// String names the pod in errors.
func (p *pod) String() string {
	return fmt.Sprintf("pod %s/%s (container %s)", p.ns, p.name, p.container)
}

// get reads the pod; one that does not exist is ErrGone. A caller's ctx
// that ends first is the error.
func (p *pod) get(ctx context.Context) (*corev1.Pod, error) {
	gctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	k, err := p.api.core.Pods(p.ns).Get(gctx, p.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("kubernetes: pod %s/%s does not exist (any more): pass the name of a running pod (kubectl get pods -n %s lists them); Berth never creates one: %w", p.ns, p.name, p.ns, enclosure.ErrGone)
	case err != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("kubernetes: reading pod %s/%s: %w", p.ns, p.name, ctx.Err())
	case err != nil:
		return nil, p.api.unavailable("reading pod "+p.ns+"/"+p.name, p.ns, err)
	}
	return k, nil
}

// check says whether the pod runs, is not being deleted, and has the
// container running: an error naming the phase or state otherwise.
func (p *pod) check(k *corev1.Pod) error {
	if k.DeletionTimestamp != nil {
		return fmt.Errorf("kubernetes: pod %s/%s is being deleted: Berth never creates a pod; start a new run with a running one: %w", p.ns, p.name, enclosure.ErrGone)
	}
	if k.Status.Phase != corev1.PodRunning {
		return fmt.Errorf("kubernetes: pod %s/%s is %s, not Running: Berth never creates or starts a pod; wait until it runs (kubectl get pod -n %s %s) and start a new run: %w", p.ns, p.name, k.Status.Phase, p.ns, p.name, enclosure.ErrGone)
	}
	var names []string
	for _, c := range k.Spec.Containers {
		names = append(names, c.Name)
	}
	for _, s := range slices.Concat(k.Status.ContainerStatuses, k.Status.InitContainerStatuses) {
		if s.Name != p.container {
			continue
		}
		if s.State.Running == nil {
			return fmt.Errorf("kubernetes: container %s of pod %s/%s does not run (%s): start a new run once it does: %w", p.container, p.ns, p.name, describe(s.State), enclosure.ErrGone)
		}
		return nil
	}
	return fmt.Errorf("kubernetes: pod %s/%s has no running container %q (its containers: %s): name one as namespace/pod/container, or set kubernetes.container: %w", p.ns, p.name, p.container, strings.Join(names, ", "), enclosure.ErrNotFound)
}

func describe(s corev1.ContainerState) string {
	switch {
	case s.Waiting != nil:
		return "waiting: " + s.Waiting.Reason
	case s.Terminated != nil:
		return fmt.Sprintf("terminated: %s, exit code %d", s.Terminated.Reason, s.Terminated.ExitCode)
	}
	return "no state yet"
}

// failed explains an error of a call on the pod: it was deleted, it or
// the container stopped, or the API server did not answer.
func (p *pod) failed(ctx context.Context, what string, err error) error {
	// ctx may be what ended the call: the pod is read all the same, and
	// asked (Gone): an exec that failed may be the first sign that its
	// container stopped.
	if rerr := p.settled(context.WithoutCancel(ctx)); rerr != nil {
		return rerr
	}
	return fmt.Errorf("kubernetes: %s: %s: %w", p, what, err)
}

// running reads the pod and checks it: nil while it and the container
// run; else why not, or why the API server did not answer.
func (p *pod) running(ctx context.Context) error {
	k, err := p.get(ctx)
	if err != nil {
		return err
	}
	return p.check(k)
}

// Running is nil while the pod and its container run, else why not, or
// why the API server did not answer.
func (p *pod) Running(ctx context.Context) error { return p.running(ctx) }

// Gone is the error saying the pod or its container no longer runs; nil
// while it runs, or when the API server does not answer.
//
// The API server learns of a container that stopped from the kubelet, a
// second or two later (its relist, then the status update): until then
// the pod reads as running. So a pod that reads as running is asked
// too, with an exec of the relay; one the kubelet cannot exec in is
// read again until the API server says what became of it (settleWait),
// and is gone even if it never does.
func (p *pod) Gone(ctx context.Context) error {
	if err := p.settled(ctx); !errors.Is(err, enclosure.ErrUnavailable) {
		return err
	}
	return nil
}

// settleWait bounds the wait for the API server to say what became of a
// container the kubelet can no longer exec in.
const settleWait = 10 * time.Second

// settled is running, with a pod that reads as running confirmed by an
// exec of the relay (Gone).
func (p *pod) settled(ctx context.Context) error {
	err := p.running(ctx)
	if err != nil || p.Relay == "" {
		return err
	}
	_, xerr := p.stream(ctx, relay.VersionArgs(p.Relay), remotecommand.StreamOptions{Stdout: io.Discard, Stderr: io.Discard})
	if _, ok := exitCode(xerr); ok || ctx.Err() != nil {
		return nil // the exec ran: the container runs
	}
	deadline := time.Now().Add(settleWait)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(250 * time.Millisecond):
		}
		if err := p.running(ctx); err != nil {
			return err
		}
	}
	return fmt.Errorf("kubernetes: %s: the kubelet could not exec in it (%v) and the API server still says it runs after %s: its container has stopped; start a new run once the pod runs again (kubectl describe pod -n %s %s): %w", p, xerr, settleWait, p.ns, p.name, enclosure.ErrGone)
}

// Exec opens the exec of x.Argv through the exec subresource and returns
// its stream at once: the stream is its owner goroutine's, so an exec the
// API server refuses (the pod deleted meanwhile) ends the process with
// the reason in Wait. The pod is read first: one deleted or stopped is
// the start's error, as it is the other drivers'. The exec API takes no
// working directory or environment: the relay sets them.
func (p *pod) Exec(ctx context.Context, x relayexec.Exec) (relayexec.Stream, error) {
	if err := p.running(ctx); err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.Background())
	stdinR, stdinW := io.Pipe()
	return relayexec.NewPiped(x, stdinW, 0, relayexec.PipedFuncs{
		Copy: func(stdout, stderr io.Writer) error {
			protocol, err := p.stream(sctx, x.Argv, remotecommand.StreamOptions{Stdin: stdinR, Stdout: stdout, Stderr: stderr})
			p.protocol.Store(&protocol)
			cancel()
			// Writes to stdin now fail rather than wait for a reader, and
			// the client's copy of stdin ends.
			_ = stdinW.Close()
			return err
		},
		Exit: func(err error) (int, error) {
			code, ok := exitCode(err)
			if !ok {
				return -1, p.failed(context.Background(), "the process's stream", err)
			}
			return code, nil
		},
		// Stdin's end (the relay reads EOF: over WebSocket a close
		// message, over SPDY the stream's half-close) ends the run; the
		// stream then ends with the relay, or is dropped after exitWait
		// (the API server or the pod does not answer).
		Drop: func() {
			_ = stdinW.Close()
			t := time.AfterFunc(exitWait, cancel)
			context.AfterFunc(sctx, func() { t.Stop() })
		},
	}), nil
}

// exitWait bounds the wait, once Kill closed stdin, for the stream to end
// with the relay: its grace and its SIGKILL, with room.
const exitWait = 30 * time.Second

// Run runs argv to its end (relay.Runner).
func (p *pod) Run(ctx context.Context, argv []string, stdin io.Reader) (relay.Result, error) {
	return p.run(ctx, argv, stdin)
}

// runTimeout bounds a command run to its end: the relay's short modes,
// and its installation, which streams the relay's bytes.
const runTimeout = 30 * time.Second

// run runs argv to its end (the relay's short modes, the relay's own
// installation), with stdin written and closed first when given.
func (p *pod) run(ctx context.Context, argv []string, stdin io.Reader) (relay.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	out, errOut := boundedio.Buffer{Max: relay.MaxOutput}, boundedio.Buffer{Max: relay.MaxOutput}
	o := remotecommand.StreamOptions{Stdin: stdin, Stdout: &out, Stderr: &errOut}
	_, err := p.stream(ctx, argv, o)
	code, ok := exitCode(err)
	if !ok {
		return relay.Result{}, p.failed(ctx, strings.Join(argv[:min(2, len(argv))], " "), err)
	}
	return relay.Result{Stdout: out.String(), Stderr: errOut.String(), Code: code}, nil
}
