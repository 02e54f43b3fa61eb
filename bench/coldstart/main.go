// Command coldstart measures how long an agent waits at the start of a
// run (issue 28 item 4): the time from its call to the answer of a run's
// first lsp references, and of its first debug launch (to the stop at a
// breakpoint), per language, on small real projects found on this
// machine (cobra for Go, pyflakes for Python, codemirror-promql for
// TypeScript; projects.go), through the real orchestrator binary over
// stdio (the Go client of the harness protocol).
//
// Four places, for each project:
//
//   - a fresh container: docker run of -image (berth/full:dev), the
//     project's workdir bind-mounted at its own path, a module cache of
//     the project's modules read-only (no network: GOPROXY=off), its
//     first run;
//   - the same container's second run;
//   - the host's first run, on a Berth that has not run there yet; the
//     host's caches (Go's, gopls's) hold the project already, as a
//     developer's machine's do: an unmeasured run on each project fills
//     them first;
//   - the host's second run.
//
// Each run's first call comes -think (3 s: an agent's thinking time)
// after run/start; -warm more references follow in the run (their median
// is a warm call), the same references once more after -think (a warm
// call as an agent makes one, its server idle meanwhile), then the first
// references about a file the run had
// not opened (in a second run, one the server never had open: an
// adopting run reopens what the run before had open, lsp.reopen_max, so
// the run's first call about those is warm and one about another file is
// not), then the run's first debug launch. The ratios are the
// first call's against a warm call of the same kind and against the
// host's first run: what the agent would otherwise have waited.
//
// -modes names Berth's configurations to compare, each a Berth process
// of its own: off (lsp.prewarm_max 0 and lsp.keep_warm 0: as before issue
// 28), prewarm (prewarm on, parking off), keepwarm (parking on, prewarm
// off) and both (the defaults). A build that has neither key (before
// issue 28 items 1 and 2) runs off alone, as it is, and says so.
//
// -modcache host mounts this machine's whole module cache instead (2.2
// GB here): gopls indexes a module cache it has no index of when it
// starts (importsSource "gopls"), which in a fresh container costs
// seconds of CPU in the run's first seconds (docs/enclosures/overview.md,
// "The Go caches").
//
// -volume adds a fifth place: a fresh container whose Go caches
// (GOCACHE, gopls's) are a Docker volume that an earlier container of
// the same image filled (one unmeasured run on the project), and gopls's
// index of the module cache (XDG_CACHE_HOME) with them, as a
// platform that keeps them in volumes shared by a conversation's
// containers has it (docs/enclosures/overview.md, "The Go caches").
//
// Then, per project, the server alone: the catalog's server started
// straight on the host copy (bench/internal/lspdirect, no Berth), loaded
// and warm, timed as the runs are: each round -think idle, one
// references, then -warm back to back (alone.go). It says what the
// thinking time alone costs a warm call of the server itself.
//
// Targets (issue 28): a second run's first lsp call at most 1.5x a warm
// call of the same kind; a fresh container's first references at most
// 1.5x the host's first, and its first Go debug launch at most 2x the
// host's; with prewarm and 3 s of thinking time, the first lsp call
// within 2x a warm call on the host, for Go (reported for the others).
// A warm call of the same kind is one that comes, as a run's first call
// does and as an agent's calls do, -think after the last: the verdicts
// are against it. The ratio against a warm call back to back is printed
// beside each, with the server alone's: an idle server answers slower
// than one called back to back, Berth or not (pyright alone 2-3x).
//
//	go run ./bench/coldstart [-image berth/full:dev] [-langs go,python,typescript] [-modes off,both] [-rounds 5] [-think 3s] [-warm 5] [-modcache project|host] [-volume]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/berth-dev/berth/bench/internal/berthserver"
	"github.com/berth-dev/berth/bench/internal/stats"
	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/docker/dockertest"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// mode is one configuration of Berth's lsp keys.
type mode struct {
	name, about string
	yaml        string // the lsp section
	warm        bool   // needs a build with prewarm and parking
}

var allModes = []mode{
	{name: "off", about: "prewarm and parking off (lsp.prewarm_max 0, lsp.keep_warm 0): as before issue 28", yaml: "lsp:\n  prewarm_max: 0\n  keep_warm: 0s\n"},
	{name: "prewarm", about: "prewarm on (lsp.prewarm_max 4), parking off", yaml: "lsp:\n  keep_warm: 0s\n", warm: true},
	{name: "keepwarm", about: "parking on (lsp.keep_warm 10m), prewarm off", yaml: "lsp:\n  prewarm_max: 0\n", warm: true},
	{name: "both", about: "prewarm and parking on (the defaults)", warm: true},
}

// The places, in the order they run.
const (
	fresh1 = "fresh container, run 1"
	fresh2 = "same container, run 2"
	host1  = "host, run 1"
	host2  = "host, run 2"
	vol1   = "fresh container, volume"
)

// result is one run's figures.
type result struct {
	first    time.Duration // the first references, from its call to its answer
	complete bool          // its answer is the warm calls' (not cut short by a load)
	warm     time.Duration // the median of the references after it
	idle     time.Duration // then the same references once more, -think after the last
	other    time.Duration // then the first references about a file the run had not opened
	came     string        // how the run's server came, from lsp status
	launch   time.Duration // the first debug launch to its stop; 0 without an adapter
}

func main() {
	image := flag.String("image", "berth/full:dev", "the containers' image (scripts/images builds it)")
	langs := flag.String("langs", "go,python,typescript", "the projects' languages")
	modes := flag.String("modes", "off,both", "Berth's configurations: off, prewarm, keepwarm, both")
	think := flag.Duration("think", 3*time.Second, "the wait between run/start and the run's first call")
	warm := flag.Int("warm", 5, "references after the first in each run (their median is a warm call)")
	modcache := flag.String("modcache", "project", "the fresh containers' Go module cache: project (the project's modules only, as its go mod download leaves them) or host (this machine's whole module cache, read-only)")
	volume := flag.Bool("volume", false, "also a fresh container whose Go caches are a volume an earlier container filled")
	rounds := flag.Int("rounds", 5, "rounds of every mode and place (medians are printed; a warm call after the idle is one sample a round)")
	flag.Parse()
	if *modcache != "project" && *modcache != "host" {
		fmt.Fprintln(os.Stderr, "bench/coldstart: -modcache is project or host")
		os.Exit(2)
	}
	if *warm < 1 || *rounds < 1 {
		fmt.Fprintln(os.Stderr, "bench/coldstart: -warm and -rounds must be at least 1")
		os.Exit(2)
	}
	if err := run(*image, strings.Split(*langs, ","), strings.Split(*modes, ","), *think, *warm, *rounds, *volume, *modcache == "host"); err != nil {
		fmt.Fprintln(os.Stderr, "bench/coldstart:", err)
		os.Exit(1)
	}
}

func run(image string, langs, modeNames []string, think time.Duration, warm, rounds int, volume, hostModcache bool) error {
	root, err := goEnv("GOMOD")
	if err != nil || root == "" || root == os.DevNull {
		return fmt.Errorf("not inside the Berth module: run this from the repository (go run ./bench/coldstart)")
	}
	root = filepath.Dir(root)
	tmp, err := os.MkdirTemp("", "berth-bench-coldstart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	tmp, _ = filepath.EvalSymlinks(tmp)
	projs, err := projects(tmp, langs)
	if err != nil {
		return err
	}
	if _, err := relaytest.Build(tmp); err != nil {
		return err
	}
	bin, err := berthserver.Build(root, tmp)
	if err != nil {
		return err
	}
	supported, err := hasWarm(bin)
	if err != nil {
		return err
	}
	var ms []mode
	for _, name := range modeNames {
		i := slicesIndex(allModes, name)
		if i < 0 {
			return fmt.Errorf("-modes: no mode %q; the modes are off, prewarm, keepwarm and both", name)
		}
		m := allModes[i]
		switch {
		case !supported && m.warm:
			fmt.Printf("mode %s skipped: this build has neither lsp.prewarm_max nor lsp.keep_warm (issue 28 items 1 and 2)\n", m.name)
			continue
		case !supported:
			m.yaml, m.about = "", "as this build is: it has neither prewarm nor parking"
		}
		ms = append(ms, m)
	}
	modcache, err := goEnv("GOMODCACHE")
	if err != nil {
		return err
	}
	imageID, err := dockertest.Run("image", "inspect", "-f", "{{.Id}}", image)
	if err != nil {
		return fmt.Errorf("%w: build it with scripts/images", err)
	}
	env, _ := dockertest.Run("image", "inspect", "-f", "{{range .Config.Env}}{{.}} {{end}}", image)
	baked := "no"
	if strings.Contains(env, "GOCACHE=") {
		baked = "yes"
	}

	// Everything this run starts in Docker carries the label, so that an
	// interrupted run removes it.
	label := fmt.Sprintf("berth.bench=coldstart-%d", os.Getpid())
	cleanup := func() {
		if ids, _ := dockertest.Run("ps", "-aq", "--filter", "label="+label); ids != "" {
			_, _ = dockertest.Run(append([]string{"rm", "-f"}, strings.Fields(ids)...)...)
		}
		if vols, _ := dockertest.Run("volume", "ls", "-q", "--filter", "label="+label); vols != "" {
			_, _ = dockertest.Run(append([]string{"volume", "rm", "-f"}, strings.Fields(vols)...)...)
		}
	}
	defer cleanup()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		cleanup()
		os.Exit(1)
	}()
	b := &bench{tmp: tmp, bin: bin, image: image, modcache: modcache, hostModcache: hostModcache, label: label, think: think, warm: warm}

	// The host's caches hold the projects first, as a developer's do.
	fmt.Fprintln(os.Stderr, "coldstart: one unmeasured run per project on the host, to fill the host's caches")
	srv, err := startServer(bin, tmp, "fill", ms[0].yaml)
	if err != nil {
		return err
	}
	for _, p := range projs {
		if _, err := b.measure(srv, nil, p, 0); err != nil {
			srv.Close()
			return fmt.Errorf("%s, filling the host's caches: %w", p.lang, err)
		}
	}
	srv.Close()

	// Rounds, each mode in turn within a round, so that a change of the
	// machine's load weighs on every mode alike; a Berth of its own per
	// mode and round, so that its host run 1 is the first.
	results := map[string]map[string]map[string][]result{} // mode, lang, place
	for _, m := range ms {
		results[m.name] = map[string]map[string][]result{}
		for _, p := range projs {
			results[m.name][p.lang] = map[string][]result{}
		}
	}
	// A round of a mode that fails (on a shared machine another test may
	// restart the engine under it) is run again, up to twice, once the
	// engine answers; its figures count only when the whole round ran.
	for round := 1; round <= rounds; round++ {
		for _, m := range ms {
			var got map[string]map[string]result
			var err error
			for attempt := 1; ; attempt++ {
				if got, err = b.round(projs, m, round, rounds, volume); err == nil {
					break
				}
				if attempt == 3 {
					return err
				}
				fmt.Fprintf(os.Stderr, "coldstart: %v\ncoldstart: running round %d of mode %s again, once the engine answers\n", err, round, m.name)
				cleanup()
				if err := waitEngine(2 * time.Minute); err != nil {
					return err
				}
			}
			for lang, places := range got {
				for place, r := range places {
					results[m.name][lang][place] = append(results[m.name][lang][place], r)
				}
			}
		}
	}
	// The server alone, with no Berth: what a warm call costs it after
	// the same thinking time, against one right after another.
	alone := map[string]aloneResult{}
	for _, p := range projs {
		fmt.Fprintf(os.Stderr, "coldstart: %s, the server alone (%s), on the host\n", p.lang, p.server)
		if alone[p.lang], err = b.alone(p, rounds); err != nil {
			return fmt.Errorf("%s: %w", p.lang, err)
		}
	}
	mc := "the project's modules"
	if hostModcache {
		mc = "this machine's whole module cache"
	}
	report(image, imageID, baked, mc, think, warm, rounds, ms, projs, results, alone, volume)
	return nil
}

// round measures every project in every place once, with a Berth of
// its own in mode m.
func (b *bench) round(projs []*project, m mode, round, rounds int, volume bool) (map[string]map[string]result, error) {
	srv, err := startServer(b.bin, b.tmp, m.name, m.yaml)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	out := map[string]map[string]result{}
	for _, p := range projs {
		fmt.Fprintf(os.Stderr, "coldstart: round %d of %d, mode %s\n", round, rounds, m.name)
		if out[p.lang], err = b.places(srv, p, volume); err != nil {
			return nil, fmt.Errorf("round %d, mode %s, %s: %w", round, m.name, p.lang, err)
		}
	}
	return out, nil
}

// waitEngine waits until docker info answers.
func waitEngine(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		_, err := dockertest.Run("info")
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the engine did not answer for %s: %w", limit, err)
		}
		time.Sleep(time.Second)
	}
}

func slicesIndex(ms []mode, name string) int {
	for i, m := range ms {
		if m.name == name {
			return i
		}
	}
	return -1
}

// bench holds what every measurement shares.
type bench struct {
	tmp, bin, image, modcache, label string
	hostModcache                     bool // the containers mount this machine's whole module cache
	think                            time.Duration
	warm                             int
}

// places measures p in each place, in order, on srv.
func (b *bench) places(srv *berthserver.Server, p *project, volume bool) (map[string]result, error) {
	out := map[string]result{}
	id, err := b.container(p, "")
	if err != nil {
		return nil, err
	}
	enc := &rpc.EnclosureParam{Driver: "docker", ID: id}
	for i, place := range []string{fresh1, fresh2} {
		fmt.Fprintf(os.Stderr, "coldstart: %s, %s\n", p.lang, place)
		if out[place], err = b.measure(srv, enc, p, i); err != nil {
			return nil, fmt.Errorf("%s: %w", place, err)
		}
	}
	_, _ = dockertest.Run("rm", "-f", id)
	for i, place := range []string{host1, host2} {
		fmt.Fprintf(os.Stderr, "coldstart: %s, %s\n", p.lang, place)
		if out[place], err = b.measure(srv, nil, p, i); err != nil {
			return nil, fmt.Errorf("%s: %w", place, err)
		}
	}
	if !volume {
		return out, nil
	}
	vol, err := dockertest.Run("volume", "create", "--label", b.label)
	if err != nil {
		return nil, err
	}
	defer dockertest.Run("volume", "rm", "-f", vol)
	fmt.Fprintf(os.Stderr, "coldstart: %s, filling the volume's caches\n", p.lang)
	filler, err := b.container(p, vol)
	if err != nil {
		return nil, err
	}
	if _, err := b.measure(srv, &rpc.EnclosureParam{Driver: "docker", ID: filler}, p, 0); err != nil {
		return nil, fmt.Errorf("filling the volume: %w", err)
	}
	_, _ = dockertest.Run("rm", "-f", filler)
	id, err = b.container(p, vol)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "coldstart: %s, %s\n", p.lang, vol1)
	if out[vol1], err = b.measure(srv, &rpc.EnclosureParam{Driver: "docker", ID: id}, p, 0); err != nil {
		return nil, fmt.Errorf("%s: %w", vol1, err)
	}
	_, _ = dockertest.Run("rm", "-f", id)
	return out, nil
}

// container starts a fresh container of p as a harness makes one: the
// projects at their own paths, p's module cache read-only (with
// -modcache host, this machine's whole one), no network, sleeping. With
// vol, the volume holds the Go caches (GOCACHE, GOPLSCACHE and gopls's
// index of the module cache, under XDG_CACHE_HOME).
func (b *bench) container(p *project, vol string) (string, error) {
	args := []string{"run", "-d", "--network", "none", "--label", b.label,
		"--label", enclosure.ConversationLabel + "=bench-coldstart",
		"-v", b.tmp + ":" + b.tmp, "-e", "GOPROXY=off", "-e", "GOFLAGS=-mod=readonly"}
	switch {
	case b.hostModcache:
		args = append(args, "-v", b.modcache+":/root/go/pkg/mod:ro")
	case p.modcache != "":
		args = append(args, "-v", p.modcache+":/root/go/pkg/mod:ro")
	}
	if vol != "" {
		// XDG_CACHE_HOME: gopls's index of the module cache
		// (goimports, under the user's cache directory).
		args = append(args, "-v", vol+":/var/cache/go", "-e", "GOCACHE=/var/cache/go/build", "-e", "GOPLSCACHE=/var/cache/go",
			"-e", "XDG_CACHE_HOME=/var/cache/go/xdg")
	}
	id, err := dockertest.Run(append(args, b.image, "sleep", "infinity")...)
	if err != nil {
		return "", fmt.Errorf("starting a container of %s (run scripts/setup and scripts/images first): %w", b.image, err)
	}
	return id, nil
}

// measure runs one run of p at enc (nil: the host): run/start, -think,
// the first references, -warm more, the first references about the file
// of p.others[other], lsp status, the first debug launch.
func (b *bench) measure(srv *berthserver.Server, enc *rpc.EnclosureParam, p *project, other int) (result, error) {
	var r result
	line, err := position(p.dir, p.refsFile, p.refsFind)
	if err != nil {
		return r, err
	}
	refs := map[string]any{"action": "references", "file": p.refsFile, "line": line, "symbol": p.refsSymbol}
	run, err := srv.StartRun(enc, p.dir, conversation)
	if err != nil {
		return r, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = srv.StopRun(run)
		}
	}()
	time.Sleep(b.think)
	var first string
	if r.first, first, err = srv.Call(run, "lsp", refs); err != nil {
		return r, err
	}
	var warm []time.Duration
	var last string
	for range b.warm {
		d, answer, err := srv.Call(run, "lsp", refs)
		if err != nil {
			return r, err
		}
		warm, last = append(warm, d), answer
	}
	r.warm, r.complete = stats.Median(warm), first == last
	// A warm call as an agent makes one, its thinking time after the
	// last: a server idle that long answers slower than one called back
	// to back, first call or not.
	time.Sleep(b.think)
	if r.idle, _, err = srv.Call(run, "lsp", refs); err != nil {
		return r, err
	}
	o := p.others[other]
	oline, err := position(p.dir, o.file, o.find)
	if err != nil {
		return r, err
	}
	if r.other, _, err = srv.Call(run, "lsp", map[string]any{"action": "references", "file": o.file, "line": oline, "symbol": o.symbol}); err != nil {
		return r, err
	}
	_, status, err := srv.Call(run, "lsp", map[string]any{"action": "status"})
	if err != nil {
		return r, err
	}
	r.came = came(status)
	if p.program == "" {
		stopped = true
		return r, srv.StopRun(run)
	}
	bp, err := position(p.dir, p.bpFile, p.bpFind)
	if err != nil {
		return r, err
	}
	if _, _, err := srv.Call(run, "debug", map[string]any{"operation": "breakpoints", "file": p.bpFile, "lines": []int{bp}}); err != nil {
		return r, err
	}
	d, out, err := srv.Call(run, "debug", map[string]any{"operation": "launch", "program": p.program})
	if err != nil {
		return r, err
	}
	if !strings.Contains(out, "stopped (breakpoint)") {
		return r, fmt.Errorf("launch did not stop at the breakpoint:\n%s", out)
	}
	r.launch = d
	if _, _, err := srv.Call(run, "debug", map[string]any{"operation": "terminate"}); err != nil {
		return r, err
	}
	stopped = true
	return r, srv.StopRun(run)
}

// came reads how the run's server came from lsp status: adopted from an
// earlier run, started by prewarm at run/start, or cold at the first call
// (also a build that says neither).
func came(status string) string {
	switch {
	case strings.Contains(status, "by an earlier run"):
		return "adopted"
	case strings.Contains(status, "at run/start (prewarm)"):
		return "prewarm"
	default:
		return "cold"
	}
}

// summary is a place's figures over the rounds: medians, and the range
// of the first references.
type summary struct {
	first, firstMin, firstMax time.Duration
	warm, launch, other, idle time.Duration
	came                      string // the rounds' answers, "cold" or "adopted 3/3"
	incomplete                int    // rounds whose first answer was not the warm ones'
}

func summarize(rs []result) summary {
	var first, warm, launch, other, idle []time.Duration
	cames := map[string]int{}
	var s summary
	for _, r := range rs {
		first, warm, launch = append(first, r.first), append(warm, r.warm), append(launch, r.launch)
		other, idle = append(other, r.other), append(idle, r.idle)
		cames[r.came]++
		if !r.complete {
			s.incomplete++
		}
	}
	s.first, s.warm, s.launch, s.other = stats.Median(first), stats.Median(warm), stats.Median(launch), stats.Median(other)
	s.idle = stats.Median(idle)
	s.firstMin, s.firstMax = slices.Min(first), slices.Max(first)
	var parts []string
	for _, c := range []string{"cold", "prewarm", "adopted"} {
		if n := cames[c]; n == len(rs) {
			parts = append(parts, c)
		} else if n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d/%d", c, n, len(rs)))
		}
	}
	s.came = strings.Join(parts, ",")
	return s
}

// report prints, per project, a row per mode and place, then the
// verdicts on the targets. A warm call is the median of the references
// that follow the first in the place's second run (the same container's,
// the host's), when nothing is loading any more; a volume's container has
// one run, and its own.
func report(image, imageID, baked, modcache string, think time.Duration, warm, rounds int, ms []mode, projs []*project, res map[string]map[string]map[string][]result, alone map[string]aloneResult, volume bool) {
	places := []string{fresh1, fresh2, host1, host2}
	if volume {
		places = append(places, vol1)
	}
	steady := map[string]string{fresh1: fresh2, fresh2: fresh2, host1: host2, host2: host2, vol1: vol1}
	fmt.Printf("\nthe first call of a run, %s after run/start; image %s (%.19s), Go caches in the image: %s; the fresh containers' module cache: %s; medians of %d rounds; a warm call is the median of the %d references after the first in the place's second run\n",
		think, image, imageID, baked, modcache, rounds, warm)
	for _, m := range ms {
		fmt.Printf("  mode %-8s %s\n", m.name, m.about)
	}
	x := func(a, b time.Duration) string {
		if a == 0 || b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", float64(a)/float64(b))
	}
	s := func(d time.Duration) string {
		if d == 0 {
			return "-"
		}
		if d < time.Second {
			return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
		}
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	sum := map[string]map[string]map[string]summary{}
	for _, m := range ms {
		sum[m.name] = map[string]map[string]summary{}
		for _, p := range projs {
			sum[m.name][p.lang] = map[string]summary{}
			for _, pl := range places {
				sum[m.name][p.lang][pl] = summarize(res[m.name][p.lang][pl])
			}
		}
	}
	for _, p := range projs {
		fmt.Printf("\n%s: %s\n", p.lang, p.about)
		fmt.Printf("  %-8s %-24s %10s %-19s %-14s %8s %9s %9s %11s %9s %10s %9s %10s %9s\n", "mode", "place", "1st refs", "(range)", "server", "warm", "1st/warm", "/host 1st", "1st launch", "/host 1st", "new file", "/warm", "warm, idle", "1st/idle")
		for _, m := range ms {
			r := sum[m.name][p.lang]
			h := r[host1]
			for _, pl := range places {
				c := r[pl]
				mark := ""
				if c.incomplete > 0 {
					mark = fmt.Sprintf(" *%d", c.incomplete)
				}
				fmt.Printf("  %-8s %-24s %10s %-19s %-14s %8s %9s %9s %11s %9s %10s %9s %10s %9s%s\n", m.name, pl, s(c.first),
					"("+s(c.firstMin)+"–"+s(c.firstMax)+")", c.came, s(r[steady[pl]].warm),
					x(c.first, r[steady[pl]].warm), x(c.first, h.first), s(c.launch), x(c.launch, h.launch),
					s(c.other), x(c.other, r[steady[pl]].warm), s(c.idle), x(c.first, c.idle), mark)
			}
		}
		a := alone[p.lang]
		fmt.Printf("  the server alone (%s, no Berth), on the host: its first references about the file, opened for it -think after a references about another file: %s; then, warm, medians of %d rounds: %s after -think idle, %s back to back: %s\n",
			p.server, s(a.first), a.rounds, s(a.idle), s(a.warm), x(a.idle, a.warm))
	}
	fmt.Println("\n  *N: in N rounds the first answer differed from the warm ones (a load cut short)")
	fmt.Println("  new file: the run's first references about a file it had not opened, after its warm calls; in a second run, a file the server never had open (not reopened)")
	fmt.Println("  warm, idle: the same references again, -think after the warm calls, as an agent's next call comes; 1st/idle: the first against it")
	fmt.Println("\ntargets (medians)")
	v := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	for _, p := range projs {
		for _, m := range ms {
			r := sum[m.name][p.lang]
			hostWarm, hostIdle := r[host2].warm, r[host2].idle
			fmt.Printf("  %s, %s:\n", p.lang, m.name)
			for _, pl := range []string{fresh2, host2} {
				c := r[pl]
				fmt.Printf("    %-24s 1st refs %s a warm call after the same -think idle (target ≤1.50x): %s; %s a warm call back to back (the server alone: %s); about a file not reopened %s (reported)\n",
					pl, x(c.first, c.idle), v(float64(c.first) <= 1.5*float64(c.idle)), x(c.first, c.warm), x(alone[p.lang].idle, alone[p.lang].warm), x(c.other, c.warm))
			}
			for _, pl := range []string{fresh1, vol1} {
				if pl == vol1 && !volume {
					continue
				}
				fmt.Printf("    %-24s 1st refs %s the host's 1st (target ≤1.50x): %s\n", pl, x(r[pl].first, r[host1].first),
					v(float64(r[pl].first) <= 1.5*float64(r[host1].first)))
				if p.lang == "go" {
					fmt.Printf("    %-24s 1st launch %s the host's 1st (target ≤2x): %s\n", pl, x(r[pl].launch, r[host1].launch),
						v(float64(r[pl].launch) <= 2*float64(r[host1].launch)))
				}
			}
			if m.name == "prewarm" || m.name == "both" {
				for _, pl := range places {
					c := r[pl]
					verdict := "reported"
					if p.lang == "go" {
						verdict = v(float64(c.first) <= 2*float64(hostIdle))
					}
					fmt.Printf("    %-24s 1st refs %s a warm call on the host after the same -think idle (%s; target ≤2x for Go): %s; %s one back to back (%s); %s the server alone's first about the file\n",
						pl, x(c.first, hostIdle), s(hostIdle), verdict, x(c.first, hostWarm), s(hostWarm), x(c.first, alone[p.lang].first))
				}
			}
		}
	}
}
