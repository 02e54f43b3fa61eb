package docker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	ctypes "github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/mounts"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relayexec"
)

// Name is the driver's name in run/start's {driver, id} and in
// enclosure.auto.
const Name = "docker"

// How Dial reaches a port inside (docker.dial).
const (
	// DialRelay runs "relay dial" in an exec: no privileges, and it works
	// with --network none. The default.
	DialRelay = "relay"
	// DialNetns enters the container's network namespace from Berth's
	// side: Berth must run as root on the engine's host.
	DialNetns = "netns"
)

// Config is the "docker" section of Berth's configuration: how Berth
// reaches the Docker engine and runs processes in its containers.
type Config struct {
	// Host is the Docker engine's address (unix:///var/run/docker.sock,
	// tcp://HOST:PORT); empty: $DOCKER_HOST, else the local socket. The
	// client negotiates the API version, so Debian's docker.io 20.10 (API
	// 1.41) and newer engines both work; it is made at the first run/start
	// that needs it, never at Berth's start.
	Host string `yaml:"host"`
	// User runs processes in the container as this user (name, uid or
	// uid:gid); empty: the container's default user.
	User string `yaml:"user"`
	// Dial is how a port inside is reached: relay (an exec; works with
	// --network none, no privileges) or netns (Berth enters the
	// container's network namespace: root on the engine's host).
	Dial string `yaml:"dial"`
	// Stdio is how a process's stdin and stdout travel: socket (a unix
	// socket in its working directory, which Berth sees through the
	// workdir's mount; the exec's stream where it cannot) or exec (the
	// exec's stream, through the engine).
	Stdio string `yaml:"stdio"`
}

// DefaultConfig is the section's built-in defaults.
func DefaultConfig() Config { return Config{Dial: DialRelay, Stdio: relayexec.StdioSocket} }

// Check says what is wrong with the section, for the configuration's
// check.
func (c Config) Check() error {
	if c.Dial != "" && c.Dial != DialRelay && c.Dial != DialNetns {
		return fmt.Errorf("docker.dial %q: use %s or %s: %w", c.Dial, DialRelay, DialNetns, enclosure.ErrInvalidConfig)
	}
	if err := relayexec.CheckStdio("docker.stdio", c.Stdio); err != nil {
		return err
	}
	return CheckHost(c.Host)
}

// Options configure the driver: its section, and what every container
// driver takes (enclosure.path_map: empty, Berth's own container's
// mounts, found through the engine, else Berth's paths are the host's).
type Options struct {
	Config
	relayexec.Shared
}

// Driver attaches to running Docker containers. Its engine client is
// made on first use, so a machine with no engine starts Berth as fast as
// one with.
type Driver struct {
	opts Options

	clientOnce sync.Once
	cli        *client.Client
	cliErr     error

	// findRelay is opts.Relay, asked once, when a container first needs
	// the relay.
	findRelay func() (*relay.Binary, error)

	procSelf func() (mountinfo, cgroup, hostname string)
	selfMu   sync.Mutex
	selfDone bool
	self     mounts.Table // Berth's own view of the host; nil: the same

	// installer remembers where the relay went in each container, so a
	// second run in the same container checks that one place first.
	installer relayexec.Installer
}

var _ enclosure.Driver = (*Driver)(nil)

// New returns the driver. It does not contact the engine.
func New(o Options) *Driver {
	if o.Dial == "" {
		o.Dial = DialRelay
	}
	o.Shared = o.Shared.WithDefaults()
	return &Driver{opts: o, findRelay: o.FindRelay("docker"), procSelf: procSelf}
}

// CheckHost says whether host is an engine address the client accepts,
// for the configuration's check.
func CheckHost(host string) error {
	if host == "" {
		return nil
	}
	if _, err := client.ParseHostURL(host); err != nil {
		return fmt.Errorf("docker.host %q: %v: use unix:///path/to/docker.sock or tcp://HOST:PORT", host, err)
	}
	return nil
}

func (d *Driver) Name() string { return Name }

// Close releases the engine client's idle connections. Enclosures
// attached through the driver must not be used afterwards.
func (d *Driver) Close() error {
	if d.cli != nil {
		return d.cli.Close()
	}
	return nil
}

// apiTimeout bounds a call the engine answers at once (inspect, list,
// exec create): an engine that does not answer within it is taken as
// gone rather than waited for.
const apiTimeout = 10 * time.Second

func (d *Driver) client() (*client.Client, error) {
	d.clientOnce.Do(func() {
		opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
		if d.opts.Host != "" {
			opts = append(opts, client.WithHost(d.opts.Host))
		}
		d.cli, d.cliErr = client.New(opts...)
		if d.cliErr != nil {
			d.cliErr = fmt.Errorf("docker engine client: %v (check DOCKER_HOST or docker.host): %w", d.cliErr, enclosure.ErrUnavailable)
		}
	})
	return d.cli, d.cliErr
}

// unavailable wraps an error of the engine that did not answer.
func (d *Driver) unavailable(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("no answer within %s", apiTimeout)
	}
	return fmt.Errorf("docker engine at %s did not answer: %v: check that the engine runs and answers there (docker info; docker.host or DOCKER_HOST names it), then call again: %w", d.cli.DaemonHost(), err, enclosure.ErrUnavailable)
}

// Find returns the running containers labelled
// berth.conversation=<conversationID>.
func (d *Driver) Find(ctx context.Context, conversationID string) ([]string, error) {
	cli, err := d.client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	res, err := cli.ContainerList(ctx, client.ContainerListOptions{
		Filters: make(client.Filters).Add("label", enclosure.ConversationLabel+"="+conversationID),
	})
	if err != nil {
		return nil, d.unavailable(err)
	}
	var ids []string
	for _, c := range res.Items {
		if c.State == ctypes.StateRunning {
			ids = append(ids, c.ID)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// Attach inspects the container with this id or name and returns it as
// an enclosure when it runs: with the relay installed, its mounts read,
// and Berth's own paths translated when Berth runs in a container too.
func (d *Driver) Attach(ctx context.Context, id string) (enclosure.Enclosure, error) {
	if id == "" {
		return nil, fmt.Errorf("docker: no container named: pass {driver: \"docker\", id: <container id or name>}: %w", enclosure.ErrInvalidConfig)
	}
	cli, err := d.client()
	if err != nil {
		return nil, err
	}
	info, err := d.inspect(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := notRunning(info); err != nil {
		return nil, err
	}
	bin, err := d.findRelay()
	if err != nil {
		return nil, err
	}
	if err := d.checkArch(ctx, info, bin); err != nil {
		return nil, err
	}
	self, err := d.selfTable(ctx)
	if err != nil {
		return nil, err
	}
	c := &container{cli: cli, id: info.ID, name: strings.TrimPrefix(info.Name, "/"), user: d.opts.User}
	where := "docker container " + c.name
	c.Container = &relayexec.Container{
		Engine: c, Name: Name, Id: c.id, Where: where, User: c.user,
		Paths:   mounts.Crossing{Self: self, Container: mountTable(info), Name: where, Mount: "docker run -v %s:/workspace ..."},
		Sockets: relayexec.NewSockets(d.opts.Stdio, "docker.stdio", where, d.opts.Log),
		Netns:   d.opts.Dial == DialNetns,
	}
	if c.Relay, err = d.install(ctx, c, bin, info); err != nil {
		return nil, err
	}
	return c, nil
}

func (d *Driver) inspect(ctx context.Context, id string) (ctypes.InspectResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	res, err := d.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return res.Container, fmt.Errorf("no docker container %q: pass the id or name of a running container (docker ps lists them); Berth never creates one: %w", id, enclosure.ErrGone)
	}
	if err != nil {
		return res.Container, d.unavailable(err)
	}
	if res.Container.State == nil || res.Container.Config == nil {
		return res.Container, fmt.Errorf("docker container %q: the engine's answer has no state: %w", id, enclosure.ErrUnavailable)
	}
	return res.Container, nil
}

// notRunning is the error for a container that exists but does not run.
func notRunning(info ctypes.InspectResponse) error {
	s := info.State
	if s.Running && !s.Paused && !s.Restarting {
		return nil
	}
	state := string(s.Status)
	if s.Status == ctypes.StateExited || s.Status == ctypes.StateDead {
		state += fmt.Sprintf(" (exit code %d", s.ExitCode)
		if s.FinishedAt != "" {
			state += ", at " + s.FinishedAt
		}
		state += ")"
	}
	name := strings.TrimPrefix(info.Name, "/")
	if s.Status == ctypes.StateRemoving || s.Status == ctypes.StateDead {
		return fmt.Errorf("docker container %s (%.12s) is %s: it is being removed; Berth never creates one: start a new run with a running container: %w", name, info.ID, s.Status, enclosure.ErrGone)
	}
	if s.Paused {
		// Its processes are frozen, not gone: unpausing it lets the run
		// go on where it was.
		return fmt.Errorf("docker container %s (%.12s) is paused: its processes are frozen and answer nothing, and the engine starts nothing in it; Berth never unpauses a container: unpause it (docker unpause %s) and call again: %w", name, info.ID, name, enclosure.ErrPaused)
	}
	return fmt.Errorf("docker container %s (%.12s) is %s, not running: Berth never starts, unpauses or restarts a container; start it (docker start %s) and start a new run: %w", name, info.ID, state, name, enclosure.ErrGone)
}

// checkArch refuses a container whose image is built for another
// architecture than the relay: its processes could not run it.
func (d *Driver) checkArch(ctx context.Context, info ctypes.InspectResponse, bin *relay.Binary) error {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	img, err := d.cli.ImageInspect(ctx, info.Image)
	if err != nil {
		// The image may be gone while its container runs on; the
		// relay's own check (it must run) still catches a mismatch.
		d.opts.Log.Debug("docker: image inspect failed; not checking the architecture", "image", info.Image, "err", err)
		return nil
	}
	if img.Architecture != "" && img.Architecture != bin.Arch {
		return fmt.Errorf("docker container %s runs %s binaries (its image is %s) but Berth's relay %s is built for %s: build cmd/berth-relay with GOARCH=%s CGO_ENABLED=0 and point %s at it: %w",
			strings.TrimPrefix(info.Name, "/"), img.Architecture, info.Config.Image, bin.Path, bin.Arch, img.Architecture, relay.EnvPath, enclosure.ErrNotSupported)
	}
	return nil
}

// mountTable is the container's mounts: binds and volumes by their host
// paths, and tmpfs mounts (which hide what lies beneath them).
func mountTable(info ctypes.InspectResponse) mounts.Table {
	var t mounts.Table
	for _, m := range info.Mounts {
		t = append(t, mounts.Mount{Source: m.Source, Destination: m.Destination, ReadOnly: !m.RW})
	}
	if info.HostConfig != nil {
		for _, dst := range sortedKeys(info.HostConfig.Tmpfs) {
			t = append(t, mounts.Mount{Destination: dst})
		}
	}
	return t
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
