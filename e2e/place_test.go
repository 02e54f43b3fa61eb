package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-dev/berth/enclosure/docker/dockertest"
	"github.com/berth-dev/berth/enclosure/kubernetes/kubecluster"
	"github.com/berth-dev/berth/enclosure/kubernetes/kubetest"
	"github.com/berth-dev/berth/internal/procfs"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// The tool families' end-to-end bodies run in a place: on the host, or
// inside a container made as a harness makes one (issue 13 item 8). The
// host tests (TestLSPThroughTheProtocol, ...) and the container tests
// (TestContainersDocker..., e2e/containers_test.go) run the same body with
// a different place, so the container's checks are the host's.

// place is where a test's runs live.
type place struct {
	// image is the container's image; "" is the host.
	image string
	// mount is where the container sees the workdir (/workspace).
	mount string
	// auto starts runs with enclosure "auto" (the container found by its
	// conversation label) instead of naming it {driver: docker, id}.
	auto bool
	// engine runs the container: "" is Docker; engineContainerd is the
	// tests' containerd (e2e/containerd_test.go, issue 14 item 6);
	// engineKubernetes is a pod of kube, whose container is Docker's
	// (e2e/kubernetes_test.go, issue 16 item 7); engineCluster is a pod
	// of a real cluster (e2e/cluster_test.go, issue 26 item 2).
	engine  string
	kube    *kubetest.Server
	cluster *clusterPlace
}

// driver is the enclosure driver of the place's containers.
func (p place) driver() string {
	switch p.engine {
	case "":
		return "docker"
	case engineCluster:
		return engineKubernetes
	}
	return p.engine
}

// onHost is the host: no container, run/start's default enclosure.
var onHost = place{}

// inContainer is a container of image with the workdir at /workspace,
// named in run/start by its id.
func inContainer(image string) place { return place{image: image, mount: "/workspace"} }

func (p place) String() string {
	if p.image == "" {
		return "host"
	}
	return p.image
}

// site is one workdir in a place and, in a container place, the
// conversation's container that mounts it.
type site struct {
	place
	Dir          string           // the workdir as the host (and Berth) sees it
	Conversation string           // the conversation id, the container's label
	Container    string           // the container's id; "" on the host
	Pod          string           // the pod's namespace/name, behind Container (engineKubernetes, engineCluster)
	kpod         *kubecluster.Pod // the real cluster's pod (engineCluster)
	Inside       string           // the workdir as the container sees it
	// pid1 is the host's pid of the container's pid 1, looked up once:
	// processes polls every 50ms, and a container is never restarted.
	pid1 int
	// asker is shared by the site and its subs: the client that started
	// their runs, which waitNoProcesses asks which servers are parked.
	asker *asker
}

// at returns the site for dir (symlinks resolved), starting its container
// in a container place: docker run -d --network none -v DIR:MOUNT --label
// berth.conversation=ID IMAGE sleep infinity, removed at cleanup.
func (p place) at(t *testing.T, dir string) *site {
	t.Helper()
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	// A Kubernetes label value has at most 63 characters: a longer
	// conversation id would label no pod, and "auto" would find none.
	name := sanitize(t.Name())
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	s := &site{place: p, Dir: dir, Conversation: fmt.Sprintf("e2e-%s-%d", name, rand.Uint32()), asker: &asker{}}
	switch {
	case p.image == "":
	case p.engine == engineContainerd:
		s.Container = startContainerdContainer(t, p.image, dir, p.mount, s.Conversation)
		s.Inside = p.mount
	case p.engine == engineKubernetes:
		s.Pod, s.Container = startPod(t, p, dir, s.Conversation)
		s.Inside = p.mount
	case p.engine == engineCluster:
		s.kpod = startClusterPod(t, p, dir, s.Conversation)
		s.Pod, s.Container, s.Inside = s.kpod.ID(), s.kpod.ContainerID, p.mount
	default:
		s.Container = startContainer(t, p.image, dir, p.mount, s.Conversation)
		s.Inside = p.mount
	}
	return s
}

// sub is a site for the subdirectory name of s's workdir, in the same
// container and conversation: a conversation's runs in parts of the one
// tree its container mounts.
func (s *site) sub(t *testing.T, name string) *site {
	t.Helper()
	dir := filepath.Join(s.Dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sub := *s
	sub.Dir = dir
	if s.Container != "" {
		sub.Inside = path.Join(s.Inside, name)
	}
	return &sub
}

// command is argv run in the site's workdir: on the host, or with docker
// exec in the container.
func (s *site) command(argv ...string) *exec.Cmd {
	if s.Container == "" {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = s.Dir
		return cmd
	}
	switch s.engine {
	case engineContainerd:
		return ctrExec(s.Container, s.Inside, false, argv...)
	case engineCluster:
		return s.kpod.Command(s.Inside, false, argv...)
	}
	return exec.Command(dockertest.Bin, append([]string{"exec", "-w", s.Inside, s.Container}, argv...)...)
}

// run runs argv in the site's workdir and fails the test if it fails
// (building a program to debug, with the site's own compiler).
func (s *site) run(t *testing.T, argv ...string) {
	t.Helper()
	if out, err := s.command(argv...).CombinedOutput(); err != nil {
		t.Fatalf("%v in %s: %v\n%s", argv, s.place, err, out)
	}
}

// service starts argv in the site's workdir in the background (a program
// to attach to) and returns a function that kills it and waits until it
// is gone, also called at cleanup.
func (s *site) service(t *testing.T, argv ...string) (stop func()) {
	t.Helper()
	if s.Container == "" {
		cmd := s.command(argv...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var once sync.Once
		stop = func() {
			once.Do(func() {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				_ = cmd.Wait()
			})
		}
		t.Cleanup(stop)
		return stop
	}
	if s.engine == engineContainerd || s.engine == engineCluster {
		cmd := ctrExec(s.Container, s.Inside, true, argv...)
		if s.engine == engineCluster {
			cmd = s.kpod.Command(s.Inside, true, argv...)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("ctr tasks exec -d %v: %v: %s", argv, err, out)
		}
	} else {
		dockertest.Must(t, append([]string{"exec", "-d", "-w", s.Inside, s.Container}, argv...)...)
	}
	cmdline := strings.Join(argv, " ")
	stop = func() {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			var left []string
			for _, p := range s.top(t) {
				if f := strings.SplitN(p, " ", 3); len(f) == 3 && strings.Contains(f[2], cmdline) {
					pid, _ := strconv.Atoi(f[0])
					_ = syscall.Kill(pid, syscall.SIGKILL)
					left = append(left, p)
				}
			}
			if len(left) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("the service %q in %s did not die: %v", cmdline, s.Container, left)
				return
			}
		}
	}
	t.Cleanup(stop)
	return stop
}

// fresh is at(t.TempDir()).
func (p place) fresh(t *testing.T) *site { t.Helper(); return p.at(t, t.TempDir()) }

// params is run/start's parameters for a run of this site with the
// features given (nil: the defaults).
func (s *site) params(features map[string]bool) rpc.StartRunParams {
	r := rpc.StartRunParams{Workdir: s.Dir, ConversationID: s.Conversation, Features: features}
	switch {
	case s.Container == "":
	case s.auto:
		r.Enclosure = &rpc.EnclosureParam{Driver: "auto"}
	default:
		r.Enclosure = &rpc.EnclosureParam{Driver: s.driver(), ID: s.enclosureID()}
	}
	return r
}

// enclosureID is the id run/start names the site's container by: the
// pod's for a pod, else the container's.
func (s *site) enclosureID() string {
	if s.Pod != "" {
		return s.Pod
	}
	return s.Container
}

// start starts a run of this site and checks that run/start chose the
// place's enclosure.
func (s *site) start(t *testing.T, c *rpc.Client, features map[string]bool) string {
	t.Helper()
	r, err := c.StartRun(testCtx(t), s.params(features))
	if err != nil {
		t.Fatalf("run/start in %s (%s): %v", s.Dir, s.place, err)
	}
	s.asker.set(c)
	want := "host"
	if s.Container != "" {
		want = s.driver()
	}
	if r.Enclosure.Driver != want || (s.Container != "" && !strings.HasPrefix(s.enclosureID(), r.Enclosure.ID) && !strings.HasPrefix(r.Enclosure.ID, s.enclosureID()[:12])) {
		t.Fatalf("run/start chose %+v, want %s %s", r.Enclosure, want, s.Container)
	}
	return r.RunID
}

// processes lists the processes of the site's runs: on the host those
// working inside the workdir (zombies too); in a container every process
// but the container's own (its pid 1, sleep infinity).
func (s *site) processes(t *testing.T) []string {
	t.Helper()
	if s.Container == "" {
		return procfs.Strings(procfs.In(s.Dir))
	}
	own := strconv.Itoa(s.hostPid(t)) + " "
	return slices.DeleteFunc(s.top(t), func(p string) bool { return strings.HasPrefix(p, own) })
}

// waitNoProcesses waits up to 30s for the site to have no process of
// Berth's left but the language servers Berth reports parked for the
// next run (lsp status, asked through the client that started the site's
// runs; each parked server must be running): run/stop, a TTL or an idle
// timeout ended the rest.
func (s *site) waitNoProcesses(t *testing.T, after string) {
	t.Helper()
	var asked time.Time
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		left := s.processes(t)
		if len(left) == 0 {
			if s.Container != "" {
				t.Logf("the container's processes after %s: %v", after, s.top(t))
			}
			return
		}
		if time.Since(asked) > time.Second {
			asked = time.Now()
			if parked := s.parked(t); len(parked) > 0 {
				if stray := s.notParked(t, parked); len(stray) == 0 {
					t.Logf("after %s only the language servers Berth parked are left: %v", after, parked)
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left in %s after %s: %v (parked, as Berth reports: %v)", s.place, after, left, s.parked(t))
		}
	}
}

// sanitize makes a test name fit a label value and a file name.
func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			return r
		}
		return '-'
	}, name)
}

// startContainer starts a container as a harness does and removes it at
// cleanup.
func startContainer(t *testing.T, image, dir, mount, conversation string) string {
	t.Helper()
	id := dockertest.Must(t, "run", "-d", "--network", "none", "-v", dir+":"+mount,
		"--label", "berth.conversation="+conversation, image, "sleep", "infinity")
	t.Cleanup(func() {
		if _, err := dockertest.Run("rm", "-f", id); err != nil {
			t.Errorf("removing the test's container: %v", err)
		}
	})
	return id
}

// dockerTop is the container's processes as "docker top" shows them
// ("PID PPID ARGS", host pids).
func dockerTop(t *testing.T, id string) []string {
	t.Helper()
	lines := strings.Split(dockertest.Must(t, "top", id, "-eo", "pid,ppid,args"), "\n")[1:] // the header
	var out []string
	for _, l := range lines {
		out = append(out, strings.Join(strings.Fields(l), " "))
	}
	return out
}

// top is the site's container's processes, "PID PPID ARGS" with host
// pids, from its engine.
func (s *site) top(t *testing.T) []string {
	t.Helper()
	switch s.engine {
	case engineContainerd:
		return ctrTop(t, s.Container)
	case engineCluster:
		return s.kpod.Processes(t)
	}
	return dockerTop(t, s.Container)
}

// hostPid is the host's pid of the site's container's pid 1.
func (s *site) hostPid(t *testing.T) int {
	t.Helper()
	if s.pid1 == 0 {
		switch s.engine {
		case engineContainerd:
			s.pid1 = ctrTaskPid(t, s.Container)
		case engineCluster:
			s.pid1 = s.kpod.Pid(t)
		default:
			s.pid1 = hostPid(t, s.Container)
		}
	}
	return s.pid1
}

// containers lists every container on the engine, running or not.
func containers(t *testing.T) []string {
	t.Helper()
	out := dockertest.Must(t, "ps", "-aq", "--no-trunc")
	if out == "" {
		return nil
	}
	return strings.Fields(out)
}

// hostPid is the host's pid of the container's pid 1, whose /proc entry
// shows the container's network namespace.
func hostPid(t *testing.T, id string) int {
	t.Helper()
	var pid int
	fmt.Sscan(dockertest.Must(t, "inspect", "-f", "{{.State.Pid}}", id), &pid)
	return pid
}

// listeningIn reports whether something in the site listens on TCP port
// (on the host, or in the container's network namespace).
func (s *site) listeningIn(t *testing.T, port int) bool {
	t.Helper()
	table := "/proc/net/tcp"
	if s.Container != "" {
		table = fmt.Sprintf("/proc/%d/net/tcp", s.hostPid(t))
	}
	data, err := os.ReadFile(table)
	return err == nil && strings.Contains(string(data), fmt.Sprintf(":%04X 00000000:0000 0A", port))
}
