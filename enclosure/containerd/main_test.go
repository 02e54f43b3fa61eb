package containerd

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/containerd/containerdtest"
	"github.com/berth-dev/berth/enclosure/enclosuretest"
	"github.com/berth-dev/berth/enclosure/mounts"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
	"github.com/berth-dev/berth/enclosure/relayexec"
)

// testLabel is the value of containerdtest.TestLabel on this package's
// containers.
const testLabel = "enclosure-containerd"

// testRelay is the relay built as scripts/images builds it.
var testRelay *relay.Binary

func TestMain(m *testing.M) {
	if id := os.Getenv(helperEnv); id != "" {
		os.Exit(berthThatDies(id))
	}
	relaytest.DriverMain(m, func(bin *relay.Binary) (func() (int, error), error) {
		testRelay = bin
		// A missing containerd fails the run: these tests are the driver's.
		if err := containerdtest.Check(); err != nil {
			return nil, err
		}
		for _, img := range []string{enclosuretest.FullImage, enclosuretest.BaseImage} {
			if err := containerdtest.Import(img); err != nil {
				return nil, err
			}
		}
		// grpc's connection goroutines live as long as a driver's client;
		// every test closes its drivers.
		return func() (int, error) { return containerdtest.Count(testLabel) }, nil
	})
}

// run starts a harness's container: labelled with the conversation (none
// when conv is empty), workdir at /workspace (none when empty).
func run(t testing.TB, conv, image, wd string, flags ...string) string {
	t.Helper()
	return containerdtest.Run(t, testLabel, conv, image, wd, flags...)
}

// newDriver is a driver on the tests' containerd and namespace, with its
// FIFOs in a directory of the test's (fifoDir: checked empty at the end).
func newDriver(t testing.TB, o Options) *Driver {
	t.Helper()
	if o.Address == "" {
		o.Address = containerdtest.Address()
	}
	if o.Namespace == "" {
		o.Namespace = containerdtest.Namespace
	}
	if o.FIFODir == "" {
		o.FIFODir = t.TempDir()
	}
	o.Shared = relaytest.WithRelay(o.Shared, testRelay)
	d := New(o)
	t.Cleanup(func() {
		d.Close()
	})
	return d
}

func attach(t testing.TB, d *Driver, id string) *container {
	t.Helper()
	return enclosuretest.Attach[*container](t, d, id)
}

// onlySleep waits (bounded) until the task's pids are its own sleep
// alone, and fails the test with what is left otherwise.
func onlySleep(t testing.TB, id string) {
	t.Helper()
	var ps []string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if ps = containerdtest.Pids(t, id); len(ps) == 1 {
			return
		}
	}
	t.Fatalf("the task runs more than its sleep: pids %q", ps)
}

// noFIFOs waits (bounded) until the driver's FIFO directory is empty and
// the task's bundle holds no exec's pid file (the shim's state of an
// exec'd process), and fails the test with what is left otherwise.
func noFIFOs(t testing.TB, d *Driver, id string) {
	t.Helper()
	bundle := containerdtest.Bundle(id)
	var left []string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		left = fifosLeft(d)
		state, err := os.ReadDir(bundle)
		if err != nil {
			t.Fatalf("the task's bundle: %v", err)
		}
		for _, e := range state {
			if strings.HasPrefix(e.Name(), "berth-") {
				left = append(left, filepath.Join(bundle, e.Name()))
			}
		}
		if len(left) == 0 {
			return
		}
	}
	t.Fatalf("left behind: %q", left)
}

// fifosLeft lists what is in the driver's FIFO directory: FIFO
// directories, and the lock file of a driver that has execs.
func fifosLeft(d *Driver) []string {
	var left []string
	entries, _ := os.ReadDir(d.opts.FIFODir)
	for _, e := range entries {
		left = append(left, filepath.Join(d.opts.FIFODir, e.Name()))
	}
	return left
}

// helperEnv makes the test binary a Berth that attaches to the container
// it names, with its FIFOs in helperFIFOsEnv, starts a process there
// under the relay (and as many bare execs of sleep as helperBareEnv says,
// each ignoring SIGTERM, which no EOF ends) and waits to be killed
// (TestBerthKilledLeavesNothing,
// TestAttachSweepsWhatAKilledBerthLeft).
const (
	helperEnv      = "BERTH_CONTAINERD_TEST_HELPER"
	helperFIFOsEnv = "BERTH_CONTAINERD_TEST_HELPER_FIFOS"
	helperBareEnv  = "BERTH_CONTAINERD_TEST_HELPER_BARE"
	// helperKeepEnv: the process is kept (Cmd.Keep, with this grace), in
	// /workspace, with helperToken.
	helperKeepEnv = "BERTH_CONTAINERD_TEST_HELPER_KEEP"
	helperToken   = "0123456789abcdef0123456789abcdef"
)

func berthThatDies(id string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	bin, err := relay.Open(os.Getenv(relay.EnvPath))
	if err != nil {
		return fail(err)
	}
	d := New(Options{Config: Config{Address: containerdtest.Address(), Namespace: containerdtest.Namespace}, Shared: relayexec.Shared{Relay: func() (*relay.Binary, error) { return bin, nil }}, FIFODir: os.Getenv(helperFIFOsEnv)})
	enc, err := d.Attach(context.Background(), id)
	if err != nil {
		return fail(err)
	}
	bare, _ := strconv.Atoi(os.Getenv(helperBareEnv))
	for range bare {
		if _, err := enc.(*container).exec(context.Background(), execSpec{argv: []string{"sh", "-c", `trap "" TERM; exec sleep 1000`}}); err != nil {
			return fail(err)
		}
	}
	cmd := enclosure.Cmd{Path: "sh", Args: []string{"-c", "sleep 1000 & echo started; wait"}}
	if grace, err := time.ParseDuration(os.Getenv(helperKeepEnv)); err == nil {
		cmd.Dir, cmd.Stderr = "/workspace", io.Discard
		cmd.Keep = &enclosure.Keep{Kind: "test", Token: helperToken, Grace: grace}
	}
	p, err := enc.Start(context.Background(), cmd)
	if err != nil {
		return fail(err)
	}
	_, _ = io.Copy(os.Stdout, p.Stdout()) // until killed
	return 0
}

// killedBerth runs the test binary as a Berth (berthThatDies) on the
// container, with its FIFOs in fifos and bare execs that ignore SIGTERM,
// and kills it with SIGKILL once its process runs and running (when not
// nil) has returned.
func killedBerth(t *testing.T, id, fifos string, bare int, running func(), env ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+id, helperFIFOsEnv+"="+fifos, relay.EnvPath+"="+testRelay.Path)
	cmd.Env = append(cmd.Env, env...)
	cmd.Env = append(cmd.Env, helperBareEnv+"="+strconv.Itoa(bare))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Ended on every way out: a check in running that fails included.
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "started\n" {
		t.Fatalf("the helper Berth: %q, %v", line, err)
	}
	if running != nil {
		running()
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
}

// The containerd driver keeps the enclosure contract (issue 27 item 2).
// A relay with nowhere to go is declared: containerd's default spec
// mounts /run as a tmpfs that allows exec, so a container without one is
// not made on demand here; Docker and the Kubernetes stand-in run it.
func TestContainerdDriverKeepsTheEnclosureContract(t *testing.T) {
	enclosuretest.Run(t, harness{enclosuretest.Base{Driver: Name, At: "/workspace"}})
}

type harness struct{ enclosuretest.Base }

func (harness) Driver(t *testing.T, via string) enclosure.Driver {
	return newDriver(t, Options{Config: Config{Address: via}})
}

func (harness) Make(t *testing.T, o enclosuretest.Options) (string, error) {
	image := enclosuretest.FullImage
	switch o.Relay {
	case enclosuretest.RelayStreamed:
		image = enclosuretest.BaseImage
	case enclosuretest.RelayImpossible:
		return "", enclosuretest.ErrUnsupported
	}
	return run(t, o.Conversation, image, o.Workdir), nil
}

// Stop kills the task and waits until containerd says it stopped.
func (harness) Stop(t *testing.T, id string) error {
	if _, err := containerdtest.Ctr("tasks", "kill", "-s", "SIGKILL", id); err != nil {
		return err
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		out, _ := containerdtest.Ctr("tasks", "ls")
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == id && f[2] == "STOPPED" {
				return nil
			}
		}
	}
	return nil
}

func (harness) Remove(t *testing.T, id string) error {
	containerdtest.Remove(t, id)
	return nil
}

// Processes are the command lines of the task's pids, which the host
// sees as its own.
func (harness) Processes(t *testing.T, id string) []string {
	out, err := containerdtest.Ctr("tasks", "ps", id)
	if err != nil {
		return nil
	}
	var ps []string
	for _, line := range strings.Split(out, "\n")[1:] {
		if f := strings.Fields(line); len(f) > 0 {
			if b, err := os.ReadFile("/proc/" + f[0] + "/cmdline"); err == nil {
				ps = append(ps, strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " "))
			}
		}
	}
	return ps
}

func (harness) Engine() (string, string, error) { return "unix", containerdtest.Address(), nil }

// Misled is a driver whose enclosure.path_map points Berth elsewhere.
func (harness) Misled(t *testing.T, wd, elsewhere string, log *slog.Logger) (enclosure.Driver, error) {
	return newDriver(t, Options{Shared: relayexec.Shared{PathMap: mounts.Table{{Source: wd, Destination: elsewhere}}, Log: log}}), nil
}
