package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	pathpkg "path"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/internal/boundedio"
)

// pod is one attached container of a pod: the enclosure and its state.
type pod struct {
	d         *Driver
	api       *api
	ns, name  string
	container string
	relay     string // the relay's path inside
	crossing  crossing
	sidecar   bool           // Berth is in the same pod: Dial uses loopback
	sockets   *relay.Sockets // how stdin and stdout travel

	found sync.Map // LookPath's answers: name -> path
}

var _ enclosure.Enclosure = (*pod)(nil)

func (p *pod) Driver() string { return Name }

// Capabilities are a container's: nothing shared but its mounts.
func (*pod) Capabilities() enclosure.Capabilities { return enclosure.Capabilities{} }

// ID is what Attach takes back: namespace/pod/container.
func (p *pod) ID() string { return p.ns + "/" + p.name + "/" + p.container }

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
		return nil, p.api.unavailable("reading pod "+p.ns+"/"+p.name, err)
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
	// ctx may be what ended the call: the pod is read all the same.
	if rerr := p.running(context.WithoutCancel(ctx)); rerr != nil {
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

// Check is nil while the pod and its container run, else why not, or
// why the API server did not answer.
func (p *pod) Check(ctx context.Context) error { return p.running(ctx) }

// gone is the error saying the pod or its container no longer runs; nil
// while it runs, or when the API server does not answer.
func (p *pod) gone(ctx context.Context) error {
	if err := p.running(ctx); !errors.Is(err, enclosure.ErrUnavailable) {
		return err
	}
	return nil
}

// MapPath turns a path as Berth sees it into the path the container's
// processes see, through the workspace volume's mounts.
func (p *pod) MapPath(berthPath string) (string, error) { return p.crossing.inside(berthPath) }

// HostPath is MapPath's inverse.
func (p *pod) HostPath(enclosedPath string) (string, error) {
	return p.crossing.outside(enclosedPath)
}

// Writable refuses a path on a volumeMount the container has readOnly.
func (p *pod) Writable(berthPath string) error { return p.crossing.writable(berthPath) }

// LookPath asks the relay which executable name is on the container's
// PATH (its own environment's, as every exec gets it).
func (p *pod) LookPath(ctx context.Context, name string) (string, error) {
	if v, ok := p.found.Load(name); ok {
		return v.(string), nil
	}
	path, err := relay.Which(ctx, p.run, p.relay, name, p.String())
	if err != nil {
		return "", err
	}
	p.found.Store(name, path)
	return path, nil
}

// Start runs cmd under the relay in an exec: stdin framed (closing it
// closes the program's stdin; closing the stream ends the run), stdout
// and stderr apart. stdin and stdout go through a socket in cmd.Dir
// where Berth sees that directory too (kubernetes.stdio: socket), else
// in the exec's stream as well. The exec's stream is opened by the process's owner,
// so Start reads the pod first: one deleted or stopped is Start's error,
// as it is the other drivers'.
func (p *pod) Start(ctx context.Context, cmd enclosure.Cmd) (enclosure.Process, error) {
	if err := p.running(ctx); err != nil {
		return nil, err
	}
	path := cmd.Path
	if !strings.Contains(path, "/") {
		lp, err := p.LookPath(ctx, path)
		if err != nil {
			return nil, err
		}
		path = lp
	}
	tag := relay.NewTag()
	if l := p.sockets.Listen(cmd.Dir, tag, p.HostPath); l != nil {
		h, err := p.startSocket(ctx, path, tag, cmd, l)
		if !errors.Is(err, relay.ErrNotConnected) {
			return h, err
		}
	}
	return p.start(p.runArgs(path, tag, cmd, ""), tag, cmd.Stderr, ""), nil
}

// runArgs is the relay's command line for cmd. The exec API takes no
// working directory or environment: the relay sets them. With connect
// (a socket's name in cmd.Dir), the relay gives the program that socket
// as its stdin and stdout, and reads the socket's token first on its own
// stdin: on the command line every process in the pod could read it.
func (p *pod) runArgs(path, tag string, cmd enclosure.Cmd, connect string) []string {
	o := relay.RunOptions{Stdin: relay.StdinFramed, Tag: tag, Dir: cmd.Dir, Env: cmd.Env}
	if connect != "" {
		o.Connect = pathpkg.Join(cmd.Dir, connect)
	}
	return relay.RunArgs(p.relay, o, path, cmd.Args...)
}

// startSocket starts cmd with its stdin and stdout through l. It returns
// an error wrapping relay.ErrNotConnected when the relay ended without
// connecting (the container's view of the directory is not Berth's).
func (p *pod) startSocket(ctx context.Context, path, tag string, cmd enclosure.Cmd, l *relay.StdioListener) (enclosure.Process, error) {
	defer l.Close()
	h := p.start(p.runArgs(path, tag, cmd, l.Name), tag, cmd.Stderr, l.TokenLine())
	// The exec API says nothing of the relay's pid: the token alone
	// tells the relay from a stranger.
	conn, err := p.sockets.Accept(ctx, l, 0, h.streamed.Done(), func() (int, error) {
		h.attach(nil)
		return h.Wait()
	})
	h.attach(conn)
	if err != nil {
		if !errors.Is(err, relay.ErrNotConnected) {
			_ = h.Kill()
			err = fmt.Errorf("kubernetes %s: starting %s in %q: %w", p, path, cmd.Dir, err)
		}
		return nil, err
	}
	return h, nil
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
