// Command enclosure measures what running a tool inside the
// conversation's container costs against running it on the host, in one
// run, through the real orchestrator binary over stdio (the Go client of
// the harness protocol, as bench/kernel and bench/lsp drive it):
//
//   - kernel start (an eval cell with reset: the old kernel discarded, a
//     fresh one started, "1+1" run), in a container and on the host, and
//     ipykernel's own start on the host through jupyter_client (the
//     script bench/kernel uses);
//   - the eval round trip of a warm "1+1";
//   - lsp references (gopls, on this repository, as bench/lsp queries it);
//   - debug launch to the first breakpoint (debugpy).
//
// The containers are made as a harness makes one, from berth/full:dev,
// each with the workdirs bind-mounted and this machine's Go module cache
// mounted read-only (so that gopls inside resolves the repository's
// dependencies without a network), labelled berth.conversation=ID and
// sleeping: one by Docker (docker run -d --network none), one by the
// tests' containerd (scripts/containerd; ctr run -d, its own network
// namespace with only loopback, the image imported from Docker: issue 14
// item 6), and a pod of the Kubernetes driver's API-server stand-in
// (enclosure/kubernetes/kubetest: Kubernetes' own exec and port-forward
// server code over WebSocket, a Docker container behind the pod; the
// workdirs are subPaths of one volume, the host's root, which Berth sees
// at /: issue 16 item 8), and a pod of a real single-node cluster
// (kube-apiserver and a kubelet on containerd's CRI, which scripts/kube
// start makes; -kubeconfig, default $KUBECONFIG: hostNetwork, the
// workdirs subPaths of a hostPath volume of the host's root; issue 26
// item 5), which a Berth of its own reaches with the cluster's
// kubeconfig. They are removed at the end. The places alternate (in
// batches for the round trips), so all see the same load on a shared
// machine. Targets (issue 13 item 9): a kernel start in a container at
// most 0.2x ipykernel's start on the host; a container adds at most
// max(10%, 1ms) to an lsp query and at most 2ms to an eval round trip,
// medians.
//
// Each place's gopls cache is filled by a gopls of its own, stopped
// before the timed ones start (-cold skips this): a gopls that fills its
// cache itself answers more slowly afterwards, container or not, and a
// fresh container's cache is empty where the host's is full.
//
//	go run ./bench/enclosure [-starts 7] [-rounds 200] [-queries 100] [-servers 1] [-launches 7] [-cold] [-image berth/full:dev] [-kubeconfig $KUBECONFIG]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/berth-dev/berth/bench/internal/berthserver"
	"github.com/berth-dev/berth/bench/internal/ipykernel"
	"github.com/berth-dev/berth/bench/internal/lspdirect"
	"github.com/berth-dev/berth/bench/internal/stats"
	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/containerd/containerdtest"
	"github.com/berth-dev/berth/enclosure/docker/dockertest"
	"github.com/berth-dev/berth/enclosure/kubernetes/kubetest"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// python is the interpreter of both places (Debian's, with debugpy,
// ipykernel and jupyter_client on the host; the images' only one).
const python = "/usr/bin/python3"

// batch is how many round trips one place runs before the other's turn.
const batch = 20

// The lsp query: references of Errorf in orchestrator/result.go, as
// bench/lsp asks them.
const (
	// workspace is where every container mounts this repository.
	workspace  = "/workspace"
	refsFile   = "orchestrator/result.go"
	refsFind   = "func Errorf("
	refsSymbol = "Errorf"
)

// app is the debug and kernel workdir: a Python project with a
// breakpoint worth stopping at (line 3).
var app = map[string]string{
	"requirements.txt": "# none\n",
	"app.py":           "def main():\n    name = \"berth\"\n    print(\"hello\", name)\n\n\nmain()\n",
}

func main() {
	starts := flag.Int("starts", 7, "kernel starts per place")
	rounds := flag.Int("rounds", 200, "1+1 round trips per place")
	queries := flag.Int("queries", 100, "lsp references per place")
	servers := flag.Int("servers", 1, "language servers per place, asked in turn (more smooths one process's own speed, on a machine with the cores for them)")
	launches := flag.Int("launches", 7, "debug launches per place")
	image := flag.String("image", "berth/full:dev", "the container's image (scripts/images builds it)")
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "the real cluster's kubeconfig (the last line of scripts/kube start)")
	cold := flag.Bool("cold", false, "skip filling each place's gopls cache first: a fresh container's gopls then starts with an empty cache and the host's with a full one")
	flag.Parse()
	if *servers < 1 {
		fmt.Fprintln(os.Stderr, "bench/enclosure: -servers must be at least 1")
		os.Exit(2)
	}
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "bench/enclosure: no real cluster: run scripts/kube start and pass the kubeconfig it prints (KUBECONFIG=<path>) as -kubeconfig or $KUBECONFIG")
		os.Exit(2)
	}
	if err := run(*starts, *rounds, *queries, *servers, *launches, *image, *kubeconfig, *cold); err != nil {
		fmt.Fprintln(os.Stderr, "bench/enclosure:", err)
		os.Exit(1)
	}
}

func run(starts, rounds, queries, servers, launches int, image, clusterKubeconfig string, cold bool) error {
	root, err := berthserver.ModuleRoot()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "berth-bench-enclosure-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	tmp, _ = filepath.EvalSymlinks(tmp)
	work := filepath.Join(tmp, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		return err
	}
	for name, body := range app {
		if err := os.WriteFile(filepath.Join(work, name), []byte(body), 0o644); err != nil {
			return err
		}
	}

	modcache, err := goEnv("GOMODCACHE")
	if err != nil {
		return err
	}
	id, err := dockertest.Run("run", "-d", "--network", "none",
		"-v", root+":"+workspace, "-v", work+":/bench", "-v", modcache+":/root/go/pkg/mod:ro",
		"-e", "GOPROXY=off", "-e", "GOFLAGS=-mod=readonly",
		"--label", enclosure.ConversationLabel+"=bench-enclosure", image, "sleep", "infinity")
	if err != nil {
		return fmt.Errorf("starting the container (run scripts/setup and scripts/images first): %w", err)
	}
	defer dockertest.Run("rm", "-f", id)
	ctrID, err := startContainerd(image, root, work, modcache)
	if err != nil {
		return err
	}
	defer removeContainerd(ctrID)
	rel, err := relaytest.Build(tmp)
	if err != nil {
		return err
	}
	kube, podID, err := startPod(rel, image, root, work, modcache)
	if err != nil {
		return err
	}
	defer kube.Close()
	defer kube.DeletePod(podID)
	kubeconfig := filepath.Join(tmp, "kubeconfig")
	if err := kube.WriteKubeconfig(kubeconfig, "default"); err != nil {
		return err
	}
	clusterID, endCluster, err := startClusterPod(clusterKubeconfig, image, root, work, modcache)
	if err != nil {
		return err
	}
	defer endCluster()
	// An interrupted benchmark leaves no container behind either.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		_, _ = dockertest.Run("rm", "-f", id)
		removeContainerd(ctrID)
		kube.DeletePod(podID)
		endCluster()
		os.Exit(1)
	}()

	bin, err := berthserver.Build(root, tmp)
	if err != nil {
		return err
	}
	srv, err := startServer(bin, tmp, "stand-in", kubeconfig)
	if err != nil {
		return err
	}
	defer srv.Close()
	// The real cluster is the Kubernetes driver's too, with a kubeconfig
	// of its own: a Berth of its own.
	clusterSrv, err := startServer(bin, tmp, "cluster", clusterKubeconfig)
	if err != nil {
		return err
	}
	defer clusterSrv.Close()
	// The host is last: every ratio is a container's against it.
	places := []place{
		{name: "docker", srv: srv, enc: &rpc.EnclosureParam{Driver: "docker", ID: id}},
		{name: "containerd", srv: srv, enc: &rpc.EnclosureParam{Driver: "containerd", ID: ctrID}},
		{name: "kubernetes", srv: srv, enc: &rpc.EnclosureParam{Driver: "kubernetes", ID: podID}},
		{name: "cluster", srv: clusterSrv, enc: &rpc.EnclosureParam{Driver: "kubernetes", ID: clusterID}},
		{name: "host", srv: srv},
	}
	host := len(places) - 1

	// Kernel start, and ipykernel's on the host.
	ipy, err := ipykernel.New(python)
	if err != nil {
		return fmt.Errorf("ipykernel: %w", err)
	}
	defer ipy.Close()
	kernels := make([]string, len(places))
	for i, p := range places {
		if kernels[i], err = p.srv.start(p, work, "kernel"); err != nil {
			return err
		}
	}
	startTimes := make([][]time.Duration, len(places)+1) // ipykernel's last
	for range starts {
		for i, p := range places {
			d, err := p.srv.cell(kernels[i], true)
			if err != nil {
				return fmt.Errorf("%s kernel start: %w", p.name, err)
			}
			startTimes[i] = append(startTimes[i], d)
		}
		d, err := ipy.Start()
		if err != nil {
			return err
		}
		startTimes[len(places)] = append(startTimes[len(places)], d)
	}

	// eval round trips, in alternating batches.
	roundTimes := make([][]time.Duration, len(places))
	for done := 0; done < rounds; done += batch {
		for i, p := range places {
			for range min(batch, rounds-done) {
				d, err := p.srv.cell(kernels[i], false)
				if err != nil {
					return fmt.Errorf("%s 1+1: %w", p.name, err)
				}
				roundTimes[i] = append(roundTimes[i], d)
			}
		}
	}

	// lsp references, alternating; the first of each waits for gopls to
	// load the workspace.
	text, err := os.ReadFile(filepath.Join(root, refsFile))
	if err != nil {
		return err
	}
	line, col := 0, 0 // line 1-based (the tool's), col 0-based (LSP's)
	for i, l := range strings.Split(string(text), "\n") {
		if strings.Contains(l, refsFind) {
			line, col = i+1, strings.Index(l, refsSymbol)
			break
		}
	}
	if line == 0 {
		return fmt.Errorf("%s has no line with %q: point refsFile and refsFind at a function that is still there", refsFile, refsFind)
	}
	refs := map[string]any{"action": "references", "file": refsFile, "line": line, "symbol": refsSymbol}
	// servers runs (each with its own gopls) per place, since one gopls
	// process can answer a few tenths of a millisecond faster or slower
	// than another of the same build on the same workspace: queries go
	// to each in turn, and the medians are over all of them. On 2 cores
	// more than one per place (3 kinds of direct clients and 4 places,
	// each loading the module) makes the machine itself the noise.
	//
	// A gopls that fills its own file cache (~/.cache/gopls) while it
	// loads answers more slowly afterwards than one that found the cache
	// full: on this repository, 0.7-1.6 ms more a references query on the
	// host alone (GOPLSCACHE empty against the host's own cache), and
	// 1.9-2.9 ms more as a fresh container's first gopls against the
	// host's (docs/enclosures/overview.md, "Give gopls a cache that
	// outlives the container").
	// A fresh container's cache is empty and the host's is full, so
	// unless -cold each place first runs a gopls of its own to fill its
	// cache and stops it, and the timed servers start as a second
	// conversation in the same container would.
	lspRuns := make([][]string, len(places))
	answers := make([]string, len(places))
	for i, p := range places {
		if !cold {
			run, err := p.srv.start(p, root, "lsp")
			if err != nil {
				return err
			}
			if _, err := p.srv.loaded(p, run, refs); err != nil {
				return err
			}
			if err := p.srv.StopRun(run); err != nil {
				return fmt.Errorf("%s %w", p.name, err)
			}
		}
		for range servers {
			run, err := p.srv.start(p, root, "lsp")
			if err != nil {
				return err
			}
			lspRuns[i] = append(lspRuns[i], run)
			if answers[i], err = p.srv.loaded(p, run, refs); err != nil {
				return err
			}
		}
	}
	for i, p := range places[:host] {
		if answers[i] != answers[host] {
			return fmt.Errorf("references differ:\n%s:\n%s\nhost:\n%s", p.name, answers[i], answers[host])
		}
	}
	// In a random order each round, so that no place always follows
	// another.
	queryTimes := make([][]time.Duration, len(places))
	for q := range queries {
		for _, i := range rand.Perm(len(places)) {
			p := places[i]
			d, _, err := p.srv.Call(lspRuns[i][q%servers], "lsp", refs)
			if err != nil {
				return fmt.Errorf("%s references: %w", p.name, err)
			}
			queryTimes[i] = append(queryTimes[i], d)
		}
	}

	// The same references with no Berth at all, to tell the engine's and
	// the container's share of what Berth in a container adds from
	// Berth's own: a gopls of the host and one started with docker exec
	// -i in the Docker container (the stream Berth's docker driver reads
	// through the Engine API, without the relay), each by a minimal
	// client, alternating.
	noBerth, err := directReferences(srv.Ctx, rel, id, root, line, col, queries, servers)
	if err != nil {
		return err
	}

	// debug launch to the first breakpoint, a fresh run (and conversation)
	// each; one warm-up each.
	launchTimes := make([][]time.Duration, len(places))
	for n := 0; n <= launches; n++ {
		for i, p := range places {
			d, err := p.srv.launch(p, work)
			if err != nil {
				return fmt.Errorf("%s debug launch: %w", p.name, err)
			}
			if n > 0 {
				launchTimes[i] = append(launchTimes[i], d)
			}
		}
	}

	fmt.Printf("containers (%s; docker exec, containerd's task exec, the Kubernetes exec subresource through the API-server stand-in and through a real cluster's kube-apiserver and kubelet, through Berth's relay) against the host, medians; %d kernel starts, %d round trips, %d references (over %d language servers), %d launches each\n\n",
		image, starts, rounds, queries, servers, launches)
	fmt.Printf("%-34s %-11s %11s %11s %8s %10s   %s\n", "", "in", "container", "host", "ratio", "added", "target")
	// row prints a line per container: its median, the host's, the ratio,
	// what the container added, and the verdict on target.
	row := func(name string, times [][]time.Duration, target string, met func(c, h time.Duration) bool) {
		mh := stats.Median(times[host])
		for i, p := range places[:host] {
			mc := stats.Median(times[i])
			v := ""
			if target != "" {
				v = " " + verdict(met(mc, mh))
			}
			fmt.Printf("%-34s %-11s %11s %11s %7.2fx %10s   %s%s\n", name, p.name, stats.MS(mc), stats.MS(mh), float64(mc)/float64(mh), stats.MS(mc-mh), target, v)
		}
	}
	row("kernel start", startTimes[:len(places)], "", nil)
	ipyStart := stats.Median(startTimes[len(places)])
	for i, p := range places[:host] {
		c := stats.Median(startTimes[i])
		fmt.Printf("%-34s %-11s %11s %11s %7.2fx %10s   ≤0.20x ipykernel %s\n", "kernel start vs ipykernel's (host)", p.name, stats.MS(c), stats.MS(ipyStart),
			float64(c)/float64(ipyStart), "", verdict(float64(c) <= 0.2*float64(ipyStart)))
	}
	row("eval 1+1 round trip", roundTimes, "added ≤2ms", func(c, h time.Duration) bool { return c-h <= 2*time.Millisecond })
	mh := stats.Median(queryTimes[host])
	row("lsp references", queryTimes, fmt.Sprintf("added ≤%s (max of 10%%, 1ms)", stats.MS(max(mh/10, time.Millisecond))),
		func(c, h time.Duration) bool { return c-h <= max(h/10, time.Millisecond) })
	row("debug launch to first breakpoint", launchTimes, "", nil)
	// What the engine and the container add with no Berth in the way,
	// and Berth's share of what the Docker container added above.
	de, ds, dh := stats.Median(noBerth[0]), stats.Median(noBerth[1]), stats.Median(noBerth[2])
	fmt.Printf("%-34s %-11s %11s %11s %7.2fx %10s   (gopls over docker exec -i against gopls on the host's pipes: the floor of the exec stream and the container)\n",
		"lsp references, no Berth", "docker exec", stats.MS(de), stats.MS(dh), float64(de)/float64(dh), stats.MS(de-dh))
	fmt.Printf("%-34s %-11s %11s %11s %7.2fx %10s   (gopls under the relay with a socket in the workdir, as docker.stdio socket: the floor of the container itself)\n",
		"lsp references, no Berth", "socket", stats.MS(ds), stats.MS(dh), float64(ds)/float64(dh), stats.MS(ds-dh))
	berthAdded := stats.Median(queryTimes[0]) - mh
	fmt.Printf("%-34s %-11s %47s   (what Berth in the Docker container added, less what the same container adds to gopls over a socket without Berth)\n",
		"lsp references, Berth's share", "docker", stats.MS(berthAdded-(ds-dh)))
	return nil
}

// directReferences times the references query (line 1-based, col 0-based)
// on three kinds of gopls processes of their own, servers of each, in a
// random order each round: two in the Docker container id, one started with docker exec -i (the
// repository at workspace) and one that the relay (rel's copy in the
// container) gives a socket in the workdir as its stdin and stdout,
// as Berth's docker.stdio socket does; and one on the host. It returns
// their times in that order.
func directReferences(ctx context.Context, rel *relay.Binary, id, root string, line, col, n, servers int) ([3][]time.Duration, error) {
	var times [3][]time.Duration
	var clients [3][]*lspdirect.Client
	for range servers {
		in, err := lspdirect.Start(ctx, workspace, root, dockertest.Bin, "exec", "-i", "-w", workspace, id, "gopls")
		if err != nil {
			return times, err
		}
		defer in.Close()
		sock, end, err := socketGopls(ctx, rel, id, root)
		if err != nil {
			return times, err
		}
		defer end()
		defer sock.Close()
		on, err := lspdirect.Start(ctx, root, root, "gopls")
		if err != nil {
			return times, err
		}
		defer on.Close()
		for i, c := range []*lspdirect.Client{in, sock, on} {
			clients[i] = append(clients[i], c)
		}
	}
	names := [3]string{"docker exec", "socket", "host"}
	paths := [3]string{path.Join(workspace, refsFile), path.Join(workspace, refsFile), filepath.Join(root, refsFile)}
	for round := -5 * servers; round < n; round++ { // five warm-up rounds each
		for _, i := range rand.Perm(len(clients)) {
			d, err := clients[i][(round+5*servers)%servers].Request(ctx, "references", paths[i], line-1, col)
			if err != nil {
				return times, fmt.Errorf("direct references (%s): %w", names[i], err)
			}
			if round >= 0 {
				times[i] = append(times[i], d)
			}
		}
	}
	return times, nil
}

// socketGopls starts gopls in the Docker container id under the relay,
// with a socket in the workdir (root, mounted at workspace) as its stdin
// and stdout, and initializes it. end ends the exec (the relay reads its
// stdin's EOF and ends gopls).
func socketGopls(ctx context.Context, rel *relay.Binary, id, root string) (*lspdirect.Client, func(), error) {
	l, err := relay.ListenStdio(root, relay.NewTag())
	if err != nil {
		return nil, nil, err
	}
	defer l.Close()
	argv := relay.RunArgs(relay.InstallPath(rel.Version), relay.RunOptions{Stdin: relay.StdinRaw, Connect: path.Join(workspace, l.Name)}, "gopls")
	cmd := exec.Command(dockertest.Bin, append([]string{"exec", "-i", "-w", workspace, id}, argv...)...)
	stdin, err := cmd.StdinPipe() // held open: its EOF ends the run
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	end := func() {
		stdin.Close()
		_ = cmd.Wait()
	}
	if _, err := io.WriteString(stdin, l.TokenLine()); err != nil {
		end()
		return nil, nil, err
	}
	conn, err := l.Accept(ctx, nil)
	if err != nil {
		end()
		return nil, nil, fmt.Errorf("gopls over a socket: %w", err)
	}
	c, err := lspdirect.StartConn(ctx, workspace, root, conn)
	if err != nil {
		end()
		return nil, nil, err
	}
	return c, end, nil
}

// startContainerd starts the containerd container as a harness makes one
// (ctr run -d, the workdirs bind-mounted, labelled, sleeping) in the
// tests' containerd, after importing the image from Docker (skipped when
// it is already there).
func startContainerd(image, root, work, modcache string) (string, error) {
	if err := containerdtest.Check(); err != nil {
		return "", err
	}
	if err := containerdtest.Import(image); err != nil {
		return "", err
	}
	id := containerdtest.NewID()
	bind := func(src, dst, mode string) string {
		return "type=bind,src=" + src + ",dst=" + dst + ",options=rbind:" + mode
	}
	_, err := containerdtest.Ctr("run", "-d", "--label", enclosure.ConversationLabel+"=bench-enclosure",
		"--mount", bind(root, workspace, "rw"), "--mount", bind(work, "/bench", "rw"), "--mount", bind(modcache, "/root/go/pkg/mod", "ro"),
		"--env", "GOPROXY=off", "--env", "GOFLAGS=-mod=readonly",
		containerdtest.Ref(image), id, "sleep", "infinity")
	if err != nil {
		removeContainerd(id)
		return "", fmt.Errorf("starting the containerd container (run scripts/setup and scripts/images first): %w", err)
	}
	return id, nil
}

// startPod starts the Kubernetes driver's API-server stand-in and a pod
// in it as a harness makes one: the workdirs are subPaths of the pod's
// volume "workspace", the host's root (kubernetes.workspace_volume path
// /, in the configuration), the module cache mounted read-only beside.
func startPod(rel *relay.Binary, image, root, work, modcache string) (*kubetest.Server, string, error) {
	kube, err := kubetest.Start(rel)
	if err != nil {
		return nil, "", err
	}
	id, err := kube.StartPod(kubetest.Pod{
		Name: "bench-enclosure", Image: image, Conversation: "bench-enclosure",
		Workdir: "/", SubPath: strings.TrimPrefix(root, "/"), MountPath: workspace,
		More:        []kubetest.Mount{{SubPath: strings.TrimPrefix(work, "/"), MountPath: "/bench"}},
		DockerFlags: []string{"-v", modcache + ":/root/go/pkg/mod:ro", "-e", "GOPROXY=off", "-e", "GOFLAGS=-mod=readonly"},
	})
	if err != nil {
		kube.Close()
		return nil, "", fmt.Errorf("starting the pod (run scripts/setup and scripts/images first): %w", err)
	}
	return kube, id, nil
}

// removeContainerd deletes the container's task and the container.
func removeContainerd(id string) {
	_, _ = containerdtest.Ctr("tasks", "delete", "--force", id)
	_, _ = containerdtest.Ctr("containers", "delete", id)
}

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "MISSED"
}

// place is where a run lives: a container ({driver: docker,
// containerd or kubernetes, id}) or the host (enc nil), and the Berth
// that reaches it.
type place struct {
	name string
	srv  *server
	enc  *rpc.EnclosureParam
}

// server is the orchestrator over stdio, with this benchmark's calls.
type server struct{ *berthserver.Server }

// startServer writes a configuration (berth-NAME.yaml in tmp) naming the
// interpreter, the tests' containerd and kubeconfig, with the host's
// root as the workspace volume's, and starts bin serve --stdio.
func startServer(bin, tmp, name, kubeconfig string) (*server, error) {
	yaml := fmt.Sprintf("kernels:\n  python: %s\ndebug:\n  python: %s\ncontainerd:\n  address: %s\n  namespace: %s\nkubernetes:\n  kubeconfig: %s\n  workspace_volume: {name: %s, path: /}\n",
		python, python, containerdtest.Address(), containerdtest.Namespace, kubeconfig, kubetest.WorkspaceVolume)
	s, err := berthserver.Start(bin, tmp, name, "bench-enclosure", yaml)
	if err != nil {
		return nil, err
	}
	return &server{s}, nil
}

// start starts a run of p in workdir, for a conversation of its own.
func (s *server) start(p place, workdir, what string) (string, error) {
	run, err := s.StartRun(p.enc, workdir, fmt.Sprintf("bench-%s-%s", what, p.name))
	if err != nil {
		return "", fmt.Errorf("%s %w", p.name, err)
	}
	return run, nil
}

// loaded asks refs of run's language server until it has loaded the
// workspace (a cold load in a container on a loaded machine outlasts
// lsp.load_timeout, or the request's own timeout), and returns the
// answer.
func (s *server) loaded(p place, run string, refs map[string]any) (string, error) {
	for try := 1; ; try++ {
		_, answer, err := s.Call(run, "lsp", refs)
		if err == nil && !strings.Contains(answer, "had not finished loading") {
			return answer, nil
		}
		if try == 5 {
			return "", fmt.Errorf("%s references (warm-up, 5 tries): %v: %s", p.name, err, answer)
		}
	}
}

// cell runs "1+1", with reset for a kernel start.
func (s *server) cell(run string, reset bool) (time.Duration, error) {
	d, out, err := s.Call(run, "eval", map[string]any{"code": "1+1", "description": "add one and one for the benchmark", "reset": reset})
	if err == nil && out != "2" {
		err = fmt.Errorf("1+1 gave %q", out)
	}
	return d, err
}

// launch times one debug launch to the breakpoint in a fresh run (a
// session per conversation); terminate and run/stop follow, untimed.
func (s *server) launch(p place, workdir string) (time.Duration, error) {
	run, err := s.start(p, workdir, "debug")
	if err != nil {
		return 0, err
	}
	defer func() { _ = s.C.StopRun(s.Ctx, run) }()
	if _, _, err := s.Call(run, "debug", map[string]any{"operation": "breakpoints", "file": "app.py", "lines": []int{3}}); err != nil {
		return 0, err
	}
	d, out, err := s.Call(run, "debug", map[string]any{"operation": "launch", "program": "app.py"})
	if err != nil {
		return 0, err
	}
	if !strings.Contains(out, "stopped (breakpoint)") {
		return 0, fmt.Errorf("launch did not stop at the breakpoint:\n%s", out)
	}
	_, _, err = s.Call(run, "debug", map[string]any{"operation": "terminate"})
	return d, err
}

func goEnv(name string) (string, error) {
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}
