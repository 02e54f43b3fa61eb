// Command lsp measures what Berth adds to a language-server query: the
// same definition and references requests on this repository, sent
// through Berth's harness protocol (the real orchestrator binary over
// stdio, the client from orchestrator/rpc, the lsp tool, gopls) and sent
// straight to a second gopls by a minimal client (bench/internal/lspdirect),
// alternating so both stay equally warm. It prints medians, their ratio and
// the added time two ways:
//
//   - added: the median of the pair differences. Two gopls processes
//     answer, so their own variance (a references query takes 4 to 10ms,
//     and gopls goes on collecting garbage after it answers) is in it.
//   - own: on n more calls through Berth after the pairs, the time end to
//     end minus the time gopls took inside them, which Berth's metrics
//     report (berth_lsp_request_duration_seconds, scraped after each
//     call). The pairs themselves go unscraped: a scrape per call is
//     work no deployment asks of Berth, and it weighs on the next call.
//
// To split what Berth adds, it also times the same tool call made in
// process (the registry and the lsp provider, no protocol; on a third
// gopls), with its own time read from the same metric in memory, and a
// protocol round trip alone (test_echo: a small request, an
// answer as long as the lsp one). Last it times files/didWrite on a warm
// server against the direct time from didChange to gopls's first publish.
//
// Usage: go run ./bench/lsp [-n 1000] [-writes 30] [-repo .] [-gap 0]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-dev/berth/bench/internal/lspdirect"
	"github.com/berth-dev/berth/bench/internal/stats"
	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/lsp"
	"github.com/berth-dev/berth/orchestrator/metrics"
	"github.com/berth-dev/berth/orchestrator/rpc"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// query is one request: a file of the repository and the line holding
// symbol (the first line that contains find).
type query struct {
	action string
	method string // the LSP method, as Berth's metrics name it
	file   string
	find   string
	symbol string
}

var queries = []query{
	{"definition", "textDocument/definition", "orchestrator/registry.go", "return Errorf(\"tool %s (tier %s)", "Errorf"},
	{"references", "textDocument/references", "orchestrator/result.go", "func Errorf(", "Errorf"},
}

// gap is a pause before each measured request, for measuring calls that
// find every process idle (an agent's calls are seconds apart): on a
// virtual machine each wake-up of an idle process then costs far more.
var gap time.Duration

// cpuProfile, when set, names the file the in-process calls' CPU profile
// goes to: what Berth's own code costs, for `go tool pprof`.
var cpuProfile string

func main() {
	n := flag.Int("n", 1000, "measured requests per query and path (300 leave the added time uncertain by several hundred µs)")
	writes := flag.Int("writes", 30, "measured files/didWrite calls")
	flag.DurationVar(&gap, "gap", 0, "pause before each measured request")
	repo := flag.String("repo", ".", "the Go module to query (this repository)")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the in-process calls (Berth's tool path without the protocol) to this file")
	flag.Parse()
	if err := run(*n, *writes, *repo); err != nil {
		fmt.Fprintln(os.Stderr, "bench/lsp:", err)
		os.Exit(1)
	}
}

func run(n, writes int, repo string) error {
	repo, err := filepath.Abs(repo)
	if err != nil {
		return err
	}
	repo, _ = filepath.EvalSymlinks(repo)
	tmp, err := os.MkdirTemp("", "berth-bench-lsp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "orchestrator")
	build := exec.Command("go", "build", "-tags", "berthtest", "-o", bin, "./cmd/orchestrator")
	build.Dir, build.Stdout, build.Stderr = repo, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building the orchestrator: %w", err)
	}
	// The relay next to the binary, where Berth looks for it, and for the
	// in-process provider too: every host process runs under it.
	rb, err := relaytest.Build(tmp)
	if err != nil {
		return err
	}
	if err := os.Setenv(relay.EnvPath, rb.Path); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	// --listen as well, for /metrics: berth_lsp_request_duration_seconds
	// says how long gopls took inside Berth on the very calls measured.
	cmd := exec.Command(bin, "serve", "--stdio", "--listen", "127.0.0.1:0")
	// test_echo (linked by -tags berthtest), to time the protocol alone; a token of its own, so
	// --listen writes none to the user's data directory.
	cmd.Env = append(os.Environ(), "BERTH_TEST_TOOLS=1", "BERTH_TOKEN=bench-lsp-only")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	c, err := rpc.DialCommand(cmd, rpc.ClientOptions{})
	if err != nil {
		return err
	}
	defer c.Close()
	metricsURL, err := listenAddr(stderr)
	if err != nil {
		return err
	}
	if _, err := c.Initialize(ctx, "bench-lsp", "0"); err != nil {
		return err
	}
	r, err := c.StartRun(ctx, rpc.StartRunParams{Workdir: repo})
	if err != nil {
		return err
	}
	defer c.StopRun(context.Background(), r.RunID)

	d, err := lspdirect.Start(ctx, repo, repo, "gopls")
	if err != nil {
		return err
	}
	defer d.Close()
	inproc, err := newInProcess(repo)
	if err != nil {
		return err
	}
	defer inproc.run.End(orchestrator.EndStopped)

	fmt.Printf("gopls on %s, %d requests each after warm-up, alternating paths\n", repo, n)
	fmt.Println("added: the median of pair differences (two gopls processes, so gopls's own variance is in it);")
	fmt.Println("own:   Berth's time on n more calls, end to end minus the time gopls took inside each (read from /metrics after each)")
	fmt.Printf("%-13s %10s %10s %8s %10s   %s\n", "query", "direct", "berth", "ratio", "added", "target: added <= max(10% of direct, 1ms)")
	for _, q := range queries {
		text, err := os.ReadFile(filepath.Join(repo, q.file))
		if err != nil {
			return err
		}
		line := lineOf(string(text), q.find)
		if line == 0 {
			return fmt.Errorf("%s has no line with %q", q.file, q.find)
		}
		col := strings.Index(strings.Split(string(text), "\n")[line-1], q.symbol)
		args := map[string]any{"action": q.action, "file": q.file, "line": line, "symbol": q.symbol}
		// A harness passes on the model's arguments as the JSON they came in.
		rawArgs, err := json.Marshal(args)
		if err != nil {
			return err
		}
		var answer string
		berthCall := func() (time.Duration, error) {
			time.Sleep(gap)
			start := time.Now()
			res, err := c.CallTool(ctx, r.RunID, orchestrator.SurfaceFull, "lsp", json.RawMessage(rawArgs))
			el := time.Since(start)
			if err == nil && res.IsError {
				err = fmt.Errorf("%s", res.FirstText())
			}
			if err != nil {
				return 0, err
			}
			answer = res.FirstText()
			return el, nil
		}
		directCall := func() (time.Duration, error) {
			time.Sleep(gap)
			return d.Request(ctx, q.action, filepath.Join(repo, q.file), line-1, col)
		}
		// Warm-up: the first references waits for the workspace load on
		// both paths.
		if _, err := berthCall(); err != nil {
			return fmt.Errorf("%s through Berth: %w", q.action, err)
		}
		if _, err := directCall(); err != nil {
			return fmt.Errorf("%s direct: %w", q.action, err)
		}
		if _, err := inproc.call(ctx, args); err != nil {
			return fmt.Errorf("%s in process: %w", q.action, err)
		}
		var direct, berth []time.Duration
		for i := 0; i < n; i++ {
			first, second := directCall, berthCall
			if i%2 == 1 {
				first, second = berthCall, directCall
			}
			a, err := first()
			if err != nil {
				return err
			}
			b, err := second()
			if err != nil {
				return err
			}
			if i%2 == 1 {
				a, b = b, a
			}
			direct, berth = append(direct, a), append(berth, b)
		}
		report(q.action, direct, berth)
		// Berth's own time, on calls of their own: a scrape of /metrics
		// after each call says how long gopls took inside it. Not on the
		// pairs above: a scrape per call is work (and garbage) no
		// deployment asks of Berth, which scrapes every 15 s or so, and it
		// would weigh on the next call.
		spent, err := serverSeconds(metricsURL, q.method)
		if err != nil {
			return err
		}
		var own, inside []time.Duration // per call: Berth's own time, and gopls's inside it
		for i := 0; i < n; i++ {
			el, err := berthCall()
			if err != nil {
				return err
			}
			before := spent
			if spent, err = serverSeconds(metricsURL, q.method); err != nil {
				return err
			}
			g := time.Duration((spent - before) * float64(time.Second))
			own, inside = append(own, el-g), append(inside, g)
		}
		fmt.Printf("%-13s %10s %10s %8.3f   gopls's answer: direct, and inside the Berth calls (Berth's metric)\n",
			"  gopls", round(stats.Median(direct)), round(stats.Median(inside)), float64(stats.Median(inside))/float64(stats.Median(direct)))
		fmt.Printf("%-13s %21s   Berth's own time per call, median (p90 %s; target <= max(10%% of direct, 1ms): %s)\n",
			"  own", round(stats.Median(own)), round(stats.Percentile(own, 90)), verdict(stats.Median(own), stats.Median(direct)))
		// The same tool call in process, against the direct request.
		var local, direct2 []time.Duration
		inproc.own = nil
		stopProfile, err := startProfile(q.action)
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			var a, b time.Duration
			var aerr, berr error
			if i%2 == 0 {
				b, berr = inproc.call(ctx, args)
				a, aerr = directCall()
			} else {
				a, aerr = directCall()
				b, berr = inproc.call(ctx, args)
			}
			if err := errors.Join(aerr, berr); err != nil {
				return err
			}
			local, direct2 = append(local, b), append(direct2, a)
		}
		stopProfile()
		report("  in process", direct2, local)
		fmt.Printf("%-13s %21s   Berth's own time in process, median (p90 %s): the tool call minus gopls's time inside it\n",
			"  own", round(stats.Median(inproc.own)), round(stats.Percentile(inproc.own, 90)))
		// The harness protocol alone: a small request whose answer is as
		// long as the lsp answer (test_echo repeats a line of it).
		sample := answer[strings.LastIndexByte(answer, '\n')+1:] + "\n"
		echoArgs := map[string]any{"text": sample, "repeat": max(1, len(answer)/len(sample))}
		var echo []time.Duration
		for i := 0; i < n; i++ {
			time.Sleep(gap)
			start := time.Now()
			if _, err := c.CallTool(ctx, r.RunID, orchestrator.SurfaceFull, "test_echo", echoArgs); err != nil {
				return err
			}
			echo = append(echo, time.Since(start))
		}
		fmt.Printf("%-13s %21s   the harness protocol round trip alone (a small request, a %d-byte answer like the lsp one)\n", "  protocol", round(stats.Median(echo)), len(answer))
	}
	return didWrite(ctx, c, d, writes)
}

// startProfile starts the CPU profile of one query's in-process calls,
// to cpuProfile with the action's name added; the function it returns
// stops it.
func startProfile(action string) (func(), error) {
	if cpuProfile == "" {
		return func() {}, nil
	}
	f, err := os.Create(cpuProfile + "." + action)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// inProcess is the lsp provider behind a registry in this process, as
// the binary wires it, without the protocol.
type inProcess struct {
	reg *orchestrator.Registry
	run *orchestrator.Run
	m   *metrics.Metrics
	own []time.Duration // per measured call: its time minus gopls's inside it
}

// serverSeconds is the time gopls took inside the in-process calls so far
// (berth_lsp_request_duration_seconds' sum), read from the registry
// without a scrape.
func (ip *inProcess) serverSeconds(method string) float64 {
	var out dto.Metric
	h, err := ip.m.LSPRequestDuration.GetMetricWithLabelValues("gopls", method)
	if err != nil || h.(prometheus.Metric).Write(&out) != nil {
		return 0
	}
	return out.GetHistogram().GetSampleSum()
}

func newInProcess(repo string) (*inProcess, error) {
	m := metrics.NewForTest()
	p, err := lsp.New(lsp.DefaultConfig(), m)
	if err != nil {
		return nil, err
	}
	reg := orchestrator.NewRegistry(m, 0)
	reg.Add(p)
	return &inProcess{reg: reg, m: m, run: orchestrator.NewRun("bench", "", repo, host.New(), nil, nil)}, nil
}

func (ip *inProcess) call(ctx context.Context, args map[string]any) (time.Duration, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return 0, err
	}
	time.Sleep(gap)
	method := "textDocument/" + args["action"].(string)
	before := ip.serverSeconds(method)
	start := time.Now()
	res, err := ip.reg.Call(ctx, ip.run, orchestrator.SurfaceFull, "lsp", raw)
	el := time.Since(start)
	ip.own = append(ip.own, el-time.Duration((ip.serverSeconds(method)-before)*float64(time.Second)))
	if err == nil && res.IsError {
		err = fmt.Errorf("%s", res.FirstText())
	}
	return el, err
}

// didWrite times files/didWrite on a warm server against the direct time
// from didChange+didSave to gopls's first publish, on a scratch copy of a
// small module (never in the repository).
func didWrite(ctx context.Context, c *rpc.Client, d *lspdirect.Client, n int) error {
	dir, err := os.MkdirTemp("", "berth-bench-lsp-write-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	dir, _ = filepath.EvalSymlinks(dir)
	files := map[string]string{
		"go.mod":  "module example.com/w\n\ngo 1.22\n",
		"main.go": "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hello\")\n}\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	r, err := c.StartRun(ctx, rpc.StartRunParams{Workdir: dir})
	if err != nil {
		return err
	}
	defer c.StopRun(context.Background(), r.RunID)
	wd, err := lspdirect.Start(ctx, dir, dir, "gopls")
	if err != nil {
		return err
	}
	defer wd.Close()
	path := filepath.Join(dir, "main.go")
	var direct, berth []time.Duration
	for i := -1; i < n; i++ { // i == -1 warms both up
		body := files["main.go"] + strings.Repeat("\n// edit\n", i+2)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			return err
		}
		start := time.Now()
		rep, err := c.DidWrite(ctx, r.RunID, []string{"main.go"})
		b := time.Since(start)
		if err != nil {
			return err
		}
		if rep.State != orchestrator.WriteClean {
			return fmt.Errorf("didWrite: state %s: %s", rep.State, rep.Text)
		}
		a, err := wd.Write(ctx, path, body)
		if err != nil {
			return err
		}
		if i >= 0 {
			direct, berth = append(direct, a), append(berth, b)
		}
	}
	fmt.Println()
	fmt.Println("files/didWrite on a warm gopls: direct is didChange+didSave to the first publish (the changed")
	fmt.Println("package's type errors); Berth's comes after gopls.diagnose_files, the whole workspace's diagnosis")
	report("didWrite", direct, berth)
	return nil
}

// report prints medians, their ratio, and the median of the per-pair
// differences (the two requests of a pair ran back to back, so the pair
// difference is steadier than a difference of medians on a loaded
// machine); the target is judged on the pair difference.
func report(name string, direct, berth []time.Duration) {
	md, mb := stats.Median(direct), stats.Median(berth)
	var diffs []time.Duration
	for i := range direct {
		diffs = append(diffs, berth[i]-direct[i])
	}
	added := stats.Median(diffs)
	v := verdict(added, md)
	if name == "didWrite" {
		v = "(not a query: no target)"
	}
	fmt.Printf("%-13s %10s %10s %8.3f %10s   %s (min %s / %s)\n", name, round(md), round(mb), float64(mb)/float64(md), round(added), v,
		round(slices.Min(direct)), round(slices.Min(berth)))
}

// verdict judges an added time against the target: at most 10% of the
// direct time, or 1ms, whichever is larger.
func verdict(added, direct time.Duration) string {
	if added > max(direct/10, time.Millisecond) {
		return "MISSED"
	}
	return "met"
}

// listenAddr reads the orchestrator's stderr until it names its HTTP
// listener, returns the /metrics URL, and copies the rest to our stderr.
func listenAddr(stderr io.Reader) (string, error) {
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(os.Stderr, line)
		if rest, ok := strings.CutPrefix(line, "listening on http://"); ok {
			addr, _, _ := strings.Cut(rest, " ")
			go func() { _, _ = io.Copy(os.Stderr, stderr) }()
			return "http://" + addr + "/metrics", nil
		}
	}
	return "", errors.New("the orchestrator ended before it named its listener")
}

// serverSeconds scrapes the total time gopls took answering method
// inside Berth so far (0 before the first request).
func serverSeconds(url, method string) (float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	series := fmt.Sprintf(`berth_lsp_request_duration_seconds_sum{method=%q,server="gopls"} `, method)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, series); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, nil // no request yet
}

func round(d time.Duration) time.Duration {
	if d < 10*time.Millisecond && d > -10*time.Millisecond {
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(100 * time.Microsecond)
}

func lineOf(text, find string) int {
	for i, l := range strings.Split(text, "\n") {
		if strings.Contains(l, find) {
			return i + 1
		}
	}
	return 0
}
