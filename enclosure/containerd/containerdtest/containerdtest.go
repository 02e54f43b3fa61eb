// Package containerdtest gives tests the containerd that scripts/containerd
// runs for them (scripts/setup starts it), with the images scripts/images
// builds imported from Docker, and containers made as a harness makes
// them with ctr: labelled with the conversation, the workdir bind-mounted,
// sleeping. Every container a test makes is removed when it ends.
package containerdtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"golang.org/x/sys/unix"

	"github.com/berth-dev/berth/enclosure"
)

// Namespace holds the tests' images and containers.
const Namespace = "berth-test"

// TestLabel marks the containers of the tests, so a count before and
// after ignores anything else in the namespace.
const TestLabel = "berth.test"

// Address is the socket of the tests' containerd: $BERTH_CONTAINERD_ADDRESS,
// as scripts/containerd reads it, else its default.
func Address() string {
	if a := os.Getenv("BERTH_CONTAINERD_ADDRESS"); a != "" {
		return a
	}
	return "/run/berth-containerd/containerd.sock"
}

// Bundle is the directory of the container's task in the tests'
// containerd's state (scripts/containerd puts it beside the socket): the
// shim keeps an exec'd process's pid file there until it is deleted.
func Bundle(id string) string {
	return filepath.Join(filepath.Dir(Address()), "state", "io.containerd.runtime.v2.task", Namespace, id)
}

// script is scripts/containerd in this checkout.
func script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "scripts", "containerd")
}

// Check says whether the tests' containerd answers, and how to start it
// when it does not: a missing containerd fails the run.
func Check() error {
	if _, err := os.Stat(Address()); err != nil {
		return fmt.Errorf("no containerd answers at %s (%v): run scripts/setup, which starts one (scripts/containerd start)", Address(), err)
	}
	if out, err := exec.Command("ctr", "-a", Address(), "version").CombinedOutput(); err != nil {
		return fmt.Errorf("no containerd answers at %s (%v: %s): run scripts/setup, which starts one (scripts/containerd start)", Address(), err, bytes.TrimSpace(out))
	}
	return nil
}

// Ctr runs ctr against the tests' containerd and namespace and returns its
// trimmed stdout.
func Ctr(args ...string) (string, error) {
	cmd := exec.Command("ctr", append([]string{"-a", Address(), "-n", Namespace}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("ctr %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return strings.TrimSpace(string(out)), nil
}

// Ref is the name under which a Docker image is imported.
func Ref(image string) string {
	if strings.Count(strings.SplitN(image, ":", 2)[0], "/") < 2 {
		return "docker.io/" + image
	}
	return image
}

// Import imports the Docker image into the tests' namespace
// (docker save | ctr images import), unless the image there already has
// the same config (Docker's image id): a second run imports nothing. A
// lock file keeps two test binaries from importing at once.
func Import(image string) error {
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "berth-containerd-import.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return err
	}
	out, err := exec.Command("docker", "image", "inspect", "-f", "{{.Id}}", image).Output()
	if err != nil {
		return fmt.Errorf("docker image %s: %v: build it with scripts/images", image, err)
	}
	want := strings.TrimSpace(string(out))
	if have, _ := configDigest(Ref(image)); have == want {
		return nil
	}
	cmd := exec.Command("sh", "-c", `docker save "$1" | ctr -a "$2" -n "$3" images import -`, "sh", image, Address(), Namespace)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("importing %s into containerd: %v: %s", image, err, b)
	}
	return nil
}

func configDigest(ref string) (string, error) {
	cli, err := client.New(Address(), client.WithDefaultNamespace(Namespace))
	if err != nil {
		return "", err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), Namespace), time.Minute)
	defer cancel()
	img, err := cli.GetImage(ctx, ref)
	if err != nil {
		return "", err
	}
	d, err := img.Config(ctx)
	if err != nil {
		return "", err
	}
	return d.Digest.String(), nil
}

// Run starts a container as a harness does, with ctr run -d: labelled
// berth.conversation=conv (unless conv is empty) and TestLabel=label,
// workdir bind-mounted at /workspace (unless workdir is empty), extra ctr
// run flags, sleeping. It has a network namespace of its own with only
// loopback (ctr's default: no --net-host). The container and its task are
// removed when the test ends. It returns the container's id.
func Run(t testing.TB, label, conv, image, workdir string, flags ...string) string {
	t.Helper()
	id := NewID()
	args := []string{"run", "-d", "--label", TestLabel + "=" + label}
	if conv != "" {
		args = append(args, "--label", enclosure.ConversationLabel+"="+conv)
	}
	if workdir != "" {
		args = append(args, "--mount", "type=bind,src="+workdir+",dst=/workspace,options=rbind:rw")
	}
	args = append(append(args, flags...), Ref(image), id, "sleep", "infinity")
	t.Cleanup(func() { Remove(t, id) })
	if _, err := Ctr(args...); err != nil {
		t.Fatal(err)
	}
	return id
}

// Create makes a container without a task (ctr containers create),
// removed when the test ends.
func Create(t testing.TB, label, conv, image string) string {
	t.Helper()
	id := NewID()
	t.Cleanup(func() { Remove(t, id) })
	if _, err := Ctr("containers", "create", "--label", TestLabel+"="+label, "--label", enclosure.ConversationLabel+"="+conv, Ref(image), id, "sleep", "infinity"); err != nil {
		t.Fatal(err)
	}
	return id
}

// NewID is a fresh container id.
func NewID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "berth-test-" + hex.EncodeToString(b)
}

// Remove kills and deletes the container's task, then the container (and
// its snapshot). It reports, but does not stop at, what fails.
func Remove(t testing.TB, id string) {
	t.Helper()
	if _, err := Ctr("tasks", "delete", "--force", id); err != nil && !strings.Contains(err.Error(), "not found") {
		t.Errorf("removing the test container's task: %v", err)
	}
	if _, err := Ctr("containers", "delete", id); err != nil && !strings.Contains(err.Error(), "not found") {
		t.Errorf("removing the test container: %v", err)
	}
}

// Count is how many containers carry TestLabel=label.
func Count(label string) (int, error) {
	out, err := Ctr("containers", "list", "-q", "labels."+`"`+TestLabel+`"`+"=="+label)
	if err != nil {
		return 0, err
	}
	return len(strings.Fields(out)), nil
}

// Pids lists the pids of the container's task (ctr task ps), as the host
// sees them.
func Pids(t testing.TB, id string) []string {
	t.Helper()
	out, err := Ctr("tasks", "ps", id)
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, line := range strings.Split(out, "\n")[1:] {
		if f := strings.Fields(line); len(f) > 0 {
			pids = append(pids, f[0])
		}
	}
	return pids
}

// Restart stops the tests' containerd and starts it again
// (scripts/containerd stop, start); its containers' tasks keep running
// under their shims. stopped runs while it is down.
func Restart(t testing.TB, stopped func()) {
	t.Helper()
	if out, err := exec.Command(script(), "stop").CombinedOutput(); err != nil {
		t.Fatalf("scripts/containerd stop: %v: %s", err, out)
	}
	defer func() {
		if out, err := exec.Command(script(), "start").CombinedOutput(); err != nil {
			t.Fatalf("scripts/containerd start: %v: %s", err, out)
		}
	}()
	stopped()
}
