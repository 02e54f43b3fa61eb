package containerd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/identifiers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/mounts"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relayexec"
)

// Name is the driver's name in run/start's {driver, id} and in
// enclosure.auto.
const Name = "containerd"

// Defaults of the configuration keys containerd.address and
// containerd.namespace.
const (
	DefaultAddress   = "/run/containerd/containerd.sock"
	DefaultNamespace = "default"
)

// DefaultFIFODir is where the exec'd processes' FIFOs are made:
// containerd's own default, which the shims (on the host) must see at the
// same path as Berth.
const DefaultFIFODir = "/run/containerd/fifo"

// Config is the "containerd" section of Berth's configuration: how Berth
// reaches containerd, for containers made without Docker (nerdctl,
// Kubernetes' CRI, a harness's ctr).
type Config struct {
	// Address is containerd's socket, for the containerd driver.
	Address string `yaml:"address"`
	// Namespace holds the conversation's containers: default (ctr's and
	// nerdctl's), or k8s.io (Kubernetes' CRI: a pod's containers). Docker's
	// own (moby) is refused: its containers are the docker driver's.
	Namespace string `yaml:"namespace"`
	// Stdio is how a process's stdin and stdout travel, as docker.stdio:
	// socket, or exec (the exec's FIFOs, through the shim).
	Stdio string `yaml:"stdio"`
}

// DefaultConfig is the section's built-in defaults.
func DefaultConfig() Config {
	return Config{Address: DefaultAddress, Namespace: DefaultNamespace, Stdio: relayexec.StdioSocket}
}

// Check says what is wrong with the section, for the configuration's
// check.
func (c Config) Check() error {
	if err := relayexec.CheckStdio("containerd.stdio", c.Stdio); err != nil {
		return err
	}
	if c.Address != "" && !filepath.IsAbs(c.Address) {
		return fmt.Errorf("containerd.address %q: use the absolute path of containerd's socket, such as %s: %w", c.Address, DefaultAddress, enclosure.ErrInvalidConfig)
	}
	return CheckNamespace(c.Namespace)
}

// Options configure the driver: its section, what every container driver
// takes (enclosure.path_map: empty, Berth's paths are the host's), and
// where the FIFOs go.
type Options struct {
	Config
	relayexec.Shared
	// FIFODir is where the FIFOs of exec'd processes are made; empty:
	// DefaultFIFODir.
	FIFODir string
}

// Driver attaches to running containerd containers. Its client is made on
// first use and connects lazily, so a machine without containerd starts
// Berth as fast as one with.
type Driver struct {
	opts Options
	// findRelay is opts.Relay, asked once, when a container first needs
	// the relay.
	findRelay func() (*relay.Binary, error)

	clientOnce sync.Once
	cli        *client.Client
	cliErr     error

	// installer remembers where the relay went in each container, so a
	// second run in the same container checks that one place first.
	installer relayexec.Installer

	// own is the driver's claim on the execs it has (owner.go); nil
	// while it has none.
	ownMu sync.Mutex
	own   *owner

	silence relayexec.Silence // containerd's last failure to answer
}

var _ enclosure.Driver = (*Driver)(nil)

// New returns the driver. It does not contact containerd.
func New(o Options) *Driver {
	if o.Address == "" {
		o.Address = DefaultAddress
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.FIFODir == "" {
		o.FIFODir = DefaultFIFODir
	}
	o.Shared = o.Shared.WithDefaults()
	return &Driver{opts: o, findRelay: o.FindRelay("containerd")}
}

// DockerNamespace is the namespace dockerd keeps its containers in.
const DockerNamespace = "moby"

// CheckNamespace says whether ns is a namespace this driver serves, for
// the configuration's check: a name containerd accepts, and not Docker's.
func CheckNamespace(ns string) error {
	if ns == "" {
		return nil
	}
	if err := identifiers.Validate(ns); err != nil {
		return fmt.Errorf("containerd.namespace %q: %v: use a name such as default or k8s.io", ns, err)
	}
	if ns == DockerNamespace {
		return errDockerNamespace
	}
	return nil
}

// errDockerNamespace refuses Docker's namespace: its containers are
// Docker's (their labels are not in containerd, and Docker does not know
// of execs made behind it), and a container is attached through one
// driver only.
var errDockerNamespace = fmt.Errorf("containerd.namespace %q holds Docker's containers: attach to them with the docker driver ({driver: \"docker\", id}, or \"docker\" in enclosure.auto); use containerd for containers made without Docker (namespaces such as default or k8s.io): %w", DockerNamespace, enclosure.ErrInvalidConfig)

// Close releases the client's connection and the driver's claim on its
// execs. Enclosures attached through the driver must not be used
// afterwards.
func (d *Driver) Close() error {
	d.ownMu.Lock()
	if d.own != nil {
		d.own.drop()
		d.own = nil
	}
	d.ownMu.Unlock()
	if d.cli != nil {
		return d.cli.Close()
	}
	return nil
}

func (d *Driver) Name() string { return Name }

// apiTimeout bounds a call containerd answers at once (get, list, exec):
// a containerd that does not answer within it is taken as gone rather
// than waited for.
const apiTimeout = 10 * time.Second

func (d *Driver) client() (*client.Client, error) {
	d.clientOnce.Do(func() {
		d.cli, d.cliErr = client.New(d.opts.Address, client.WithDefaultNamespace(d.opts.Namespace),
			client.WithExtraDialOpts([]grpc.DialOption{
				// containerd's own dialer waits, up to the connection's
				// timeout, for a missing socket to appear: "auto" would
				// wait 10s on every machine without containerd.
				grpc.WithContextDialer(dialUnix),
				// Reconnect soon once containerd is back (see ready).
				grpc.WithConnectParams(grpc.ConnectParams{
					Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
					MinConnectTimeout: apiTimeout,
				}),
			}))
		if d.cliErr != nil {
			d.cliErr = fmt.Errorf("containerd client for %s: %v (check containerd.address): %w", d.opts.Address, d.cliErr, enclosure.ErrUnavailable)
		}
	})
	if d.cliErr == nil {
		d.ready()
	}
	return d.cli, d.cliErr
}

func dialUnix(ctx context.Context, addr string) (net.Conn, error) {
	var nd net.Dialer
	return nd.DialContext(ctx, "unix", strings.TrimPrefix(addr, "unix://"))
}

// readyWait bounds ready's wait for a connection attempt: a local
// socket answers in milliseconds, and a containerd that is down costs
// each call this much.
const readyWait = 500 * time.Millisecond

// ready makes a connection that failed (containerd was down) try again
// now rather than after its backoff, and waits for that attempt, so the
// first call after containerd is back works; calls fail fast, with
// Unavailable, while it is down. (gRPC's channel stays in transient
// failure across attempts until one succeeds, so a failed attempt is
// seen as the wait's end.)
func (d *Driver) ready() {
	conn, ok := d.cli.Conn().(*grpc.ClientConn)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyWait)
	defer cancel()
	switch conn.GetState() {
	case connectivity.TransientFailure:
		conn.ResetConnectBackoff()
		conn.WaitForStateChange(ctx, connectivity.TransientFailure)
	case connectivity.Idle:
		conn.Connect()
	}
	for st := conn.GetState(); st == connectivity.Connecting || st == connectivity.Idle; st = conn.GetState() {
		if !conn.WaitForStateChange(ctx, st) {
			return
		}
	}
}

// ctx puts the configured namespace on a call's context, with the call's
// bound.
func (d *Driver) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(namespaces.WithNamespace(ctx, d.opts.Namespace), apiTimeout)
}

// unavailable wraps an error of a containerd that did not answer.
func (d *Driver) unavailable(err error) error {
	// Only a containerd that kept a call waiting is remembered (and said
	// to give no answer): one that refused the connection (stopped, its
	// socket gone) says so at once, and may be back for the very next
	// call.
	timedOut := timedOut(err)
	if timedOut {
		err = fmt.Errorf("no answer within %s", apiTimeout)
	}
	e := fmt.Errorf("containerd at %s did not answer (%v): check that containerd runs and answers there (ctr -a %s version; containerd.address names it), then call again: %w", d.opts.Address, err, d.opts.Address, enclosure.ErrUnavailable)
	if timedOut {
		d.silence.Remember(e)
	}
	return e
}

// Find returns the containers labelled berth.conversation=<conversationID>
// in the namespace whose task runs.
func (d *Driver) Find(ctx context.Context, conversationID string) ([]string, error) {
	if d.opts.Namespace == DockerNamespace {
		return nil, errDockerNamespace
	}
	cli, err := d.client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := d.ctx(ctx)
	defer cancel()
	filter := "labels." + strconv.Quote(enclosure.ConversationLabel) + "==" + strconv.Quote(conversationID)
	cs, err := cli.Containers(ctx, filter)
	if err != nil {
		return nil, d.unavailable(err)
	}
	var ids []string
	for _, c := range cs {
		t, err := c.Task(ctx, nil)
		if cerrdefs.IsNotFound(err) {
			continue // no task: not a candidate
		}
		if err != nil {
			return nil, d.unavailable(err)
		}
		st, err := t.Status(ctx)
		if err != nil {
			return nil, d.unavailable(err)
		}
		if st.Status == client.Running {
			ids = append(ids, c.ID())
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// Attach loads the container with this id and returns it as an enclosure
// when its task runs: with its spec read and the relay installed. It
// first removes what Berths that died left behind (owner.go).
func (d *Driver) Attach(ctx context.Context, id string) (enclosure.Enclosure, error) {
	if id == "" {
		return nil, fmt.Errorf("containerd: no container named: pass {driver: \"containerd\", id: <container id>}: %w", enclosure.ErrInvalidConfig)
	}
	if d.opts.Namespace == DockerNamespace {
		return nil, errDockerNamespace
	}
	cli, err := d.client()
	if err != nil {
		return nil, err
	}
	c, err := d.load(ctx, cli, id)
	if err != nil {
		return nil, err
	}
	d.sweep(ctx, cli)
	// The relay goes in through an exec of sh when the image lacks it:
	// containerd has no copy API, and Berth never writes into a
	// container's rootfs from outside (that would change the image's
	// snapshot behind containerd's back).
	if err := d.installer.Into(ctx, c.Container, relayexec.Install{Run: c.asRoot, Log: d.opts.Log,
		Advice: "give the container sh and a writable directory that allows exec"}, d.findRelay); err != nil {
		return nil, err
	}
	return c, nil
}

// load reads the container, its spec and its task, and checks the task
// runs.
func (d *Driver) load(ctx context.Context, cli *client.Client, id string) (*container, error) {
	cctx, cancel := d.ctx(ctx)
	defer cancel()
	ctr, err := cli.LoadContainer(cctx, id)
	if cerrdefs.IsNotFound(err) {
		return nil, fmt.Errorf("no containerd container %q in namespace %s: pass the id of a container whose task runs (ctr -n %s containers ls lists them); Berth never creates one: %w", id, d.opts.Namespace, d.opts.Namespace, enclosure.ErrGone)
	}
	if err != nil {
		return nil, d.unavailable(err)
	}
	spec, err := ctr.Spec(cctx)
	if err != nil {
		return nil, fmt.Errorf("containerd container %s: reading its OCI spec: %w", id, err)
	}
	if spec.Process == nil {
		return nil, fmt.Errorf("containerd container %s: its OCI spec has no process to start execs from: %w", id, enclosure.ErrNotSupported)
	}
	c := &container{d: d, ctr: ctr, id: id, spec: spec}
	where := "containerd container " + id
	c.Container = &relayexec.Container{
		Engine: c, Name: Name, Id: id, Where: where,
		Paths: mounts.Crossing{Self: d.opts.PathMap, Container: mountTable(spec.Mounts), Name: where,
			Mount: "ctr run --mount type=bind,src=%s,dst=/workspace,options=rbind:rw ..."},
		Sockets: relayexec.NewSockets(d.opts.Stdio, "containerd.stdio", where, d.opts.Log),
	}
	if c.task, err = c.runningTask(cctx); err != nil {
		return nil, err
	}
	return c, nil
}

// paused is the error for a container whose task is paused.
func (d *Driver) paused(id string) error {
	return fmt.Errorf("containerd container %s (namespace %s) has a paused task: its processes are frozen and answer nothing, and no process starts in it; Berth never resumes a task: unpause it (ctr -n %s task resume %s, or the platform's own tool) and call again: %w",
		id, d.opts.Namespace, d.opts.Namespace, id, enclosure.ErrPaused)
}

// notRunning is the error for a container whose task does not run.
func (d *Driver) notRunning(id, state string) error {
	return fmt.Errorf("containerd container %s (namespace %s) has %s: Berth never creates or starts a task; start it (ctr -n %s task start %s, or the platform's own tool) and start a new run: %w",
		id, d.opts.Namespace, state, d.opts.Namespace, id, enclosure.ErrGone)
}

// isUnavailable says whether err is containerd not answering rather than
// an answer.
// timedOut reports whether err is a call that ran out of time, rather
// than one refused at once.
func timedOut(err error) bool {
	native := errgrpc.ToNative(err)
	return errors.Is(native, context.DeadlineExceeded) || cerrdefs.IsDeadlineExceeded(native) ||
		strings.Contains(err.Error(), context.DeadlineExceeded.Error())
}

func isUnavailable(err error) bool {
	err = errgrpc.ToNative(err) // a raw gRPC status, as Wait's
	return cerrdefs.IsUnavailable(err) || errors.Is(err, context.DeadlineExceeded) || cerrdefs.IsDeadlineExceeded(err)
}
