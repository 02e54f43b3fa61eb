// Command parking measures the parking of language servers across runs
// (issue 28 item 2) at scale, in one run, against what a user would
// otherwise have: every run's server started cold and ended with it.
//
// It parks -servers pylsp servers (one per workdir, each run's server
// parked when the run ends) under lsp.max_parked_rss_bytes (-cap), and
// prints:
//   - the parked servers' memory as Berth counts it
//     (berth_lsp_parked_rss_bytes, sampled) and as /proc reads it then,
//     against the cap;
//   - how far past its deadline (lsp.keep_warm, -keep) each parked
//     server was gone;
//   - a run's first hover answered by an adopted server against one
//     started cold, and the ratio;
//   - whether any pylsp is left once the last deadline has passed.
//
// It drives the lsp provider in this process, on the host, as the tests
// do: what it measures is the pool, not the wire.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/berth-dev/berth/bench/internal/stats"
	"github.com/berth-dev/berth/enclosure/host"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
	"github.com/berth-dev/berth/internal/procfs"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/lsp"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

func main() {
	servers := flag.Int("servers", 50, "pylsp servers to park, one per workdir")
	capBytes := flag.Int64("cap", 512<<20, "lsp.max_parked_rss_bytes")
	keep := flag.Duration("keep", 20*time.Second, "lsp.keep_warm")
	rounds := flag.Int("rounds", 5, "runs timed cold and adopted, each")
	flag.Parse()
	if err := run(*servers, *capBytes, *keep, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "parking:", err)
		os.Exit(1)
	}
}

func run(servers int, capBytes int64, keep time.Duration, rounds int) error {
	cleanup, err := relaytest.UseRelay()
	if err != nil {
		return err
	}
	defer cleanup()
	top, err := os.MkdirTemp("", "bench-parking-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(top)

	conf := lsp.DefaultConfig()
	conf.Servers = slices.DeleteFunc(lsp.DefaultServers(), func(s lsp.ServerConfig) bool { return s.Name != "pylsp" })
	conf.KeepWarm = keep
	conf.MaxParked = servers
	conf.MaxParkedPerEnclosure = servers
	conf.MaxParkedRSSBytes = capBytes
	conf.PrewarmMax = 0 // the first call starts the server, timed
	m := metrics.NewForTest()
	p, err := lsp.New(conf, m)
	if err != nil {
		return err
	}
	defer p.Shutdown()
	reg := orchestrator.NewRegistry(m, 0)
	reg.Add(p)

	b := &bench{p: p, reg: reg, m: m, conf: conf, top: top}
	fmt.Printf("pylsp servers: %d, lsp.max_parked_rss_bytes %d MiB, lsp.keep_warm %s\n", servers, capBytes>>20, keep)

	// Cold against adopted, on one workdir: the first hover of a run.
	dir, err := b.project("timed")
	if err != nil {
		return err
	}
	var cold, adopted []time.Duration
	for i := range rounds {
		d, how, _, err := b.firstHover(dir, fmt.Sprintf("cold-%d", i), true)
		if err != nil {
			return err
		}
		if how != "cold" {
			return fmt.Errorf("round %d: the server of a run after a shutdown came %s, want cold", i, how)
		}
		cold = append(cold, d)
		d, how, _, err = b.firstHover(dir, fmt.Sprintf("adopted-%d", i), false)
		if err != nil {
			return err
		}
		if how != "adopted" {
			return fmt.Errorf("round %d: the server of the next run came %s, want adopted", i, how)
		}
		adopted = append(adopted, d)
	}
	mc, ma := stats.Median(cold), stats.Median(adopted)
	fmt.Printf("first hover of a run, median of %d: cold %s, adopted %s: %.3fx (%.0fx faster)\n",
		rounds, mc.Round(time.Millisecond), ma.Round(time.Millisecond), float64(ma)/float64(mc), float64(mc)/float64(ma))
	b.p.Shutdown() // the timed workdir's server goes: the pool below holds only the parked ones
	p, err = lsp.New(conf, m)
	if err != nil {
		return err
	}
	defer p.Shutdown()
	b.p = p
	b.reg = orchestrator.NewRegistry(m, 0)
	b.reg.Add(p)

	// Park them all, sampling the pool's memory and watching each
	// server's end meanwhile.
	var (
		mu          sync.Mutex
		peakCounted float64
		all         []*parked
	)
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			v := testutil.ToFloat64(m.LSPParkedRSS)
			mu.Lock()
			peakCounted = max(peakCounted, v)
			for _, s := range all {
				if s.gone.IsZero() && !procfs.Alive(s.pid) {
					s.gone = time.Now()
				}
			}
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	var peakProc int64
	start := time.Now()
	for i := range servers {
		dir, err := b.project(strconv.Itoa(i))
		if err != nil {
			return err
		}
		_, _, pid, err := b.firstHover(dir, "park-"+strconv.Itoa(i), false)
		if err != nil {
			return err
		}
		mu.Lock()
		all = append(all, &parked{pid: pid, at: time.Now()})
		mu.Unlock()
		peakProc = max(peakProc, liveRSS(all))
	}
	parkedIn := time.Since(start)
	time.Sleep(2 * time.Second) // the last memory reads
	mu.Lock()
	steadyProc := liveRSS(all)
	alive := 0
	for _, s := range all {
		if s.gone.IsZero() {
			alive++
		}
	}
	mu.Unlock()
	fmt.Printf("parked %d servers in %s; still parked: %d (gauge %v), ended by the memory cap: %v\n",
		servers, parkedIn.Round(time.Second), alive, testutil.ToFloat64(m.LSPParked.WithLabelValues(metrics.DriverHost)),
		testutil.ToFloat64(m.LSPParkedEnds.WithLabelValues(metrics.ParkedMemory)))
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	fmt.Printf("parked memory against the cap of %d MiB: counted by Berth, peak %d MiB (%.2fx, %s); read in /proc 2 s after the last park %d MiB (%.2fx, %s), and right after each park (before Berth has read the new server's memory) up to %d MiB (%.2fx)\n",
		capBytes>>20, int64(peakCounted)>>20, peakCounted/float64(capBytes), verdict(int64(peakCounted) <= capBytes),
		steadyProc>>20, float64(steadyProc)/float64(capBytes), verdict(steadyProc <= capBytes), peakProc>>20, float64(peakProc)/float64(capBytes))

	// Deadlines: each server the caps left parked is gone within a
	// second of lsp.keep_warm after its run.
	for end := time.Now().Add(keep + 5*time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		n := 0
		for _, s := range all {
			if s.gone.IsZero() {
				n++
			}
		}
		mu.Unlock()
		if n == 0 {
			break
		}
	}
	close(stop)
	<-sampled
	var late []time.Duration
	running := 0
	for _, s := range all {
		switch {
		case s.gone.IsZero():
			running++
		case s.gone.Sub(s.at) >= keep:
			late = append(late, s.gone.Sub(s.at)-keep)
		}
	}
	if len(late) > 0 {
		slices.Sort(late)
		fmt.Printf("gone after lsp.keep_warm: %d servers, past the deadline by median %s, worst %s (target within 1 s: %s)\n",
			len(late), stats.Median(late).Round(time.Millisecond), late[len(late)-1].Round(time.Millisecond), verdict(late[len(late)-1] <= time.Second))
	}
	left := 0
	for _, pr := range procfs.All() {
		if pr.Live() && strings.Contains(pr.Cmdline(), "pylsp") && strings.HasPrefix(pr.Cwd(), top) {
			left++
		}
	}
	fmt.Printf("pylsp left once every deadline passed: %d (%s)\n", left+running, verdict(left+running == 0))
	return nil
}

type bench struct {
	p    *lsp.Provider
	reg  *orchestrator.Registry
	m    *metrics.Metrics
	conf lsp.Config
	top  string
}

// project is a small Python project of its own for pylsp.
func (b *bench) project(name string) (string, error) {
	dir := filepath.Join(b.top, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for f, body := range map[string]string{"pyproject.toml": "[project]\nname = \"p\"\n", "m.py": "def twice(x):\n    return 2 * x\n\nprint(twice(3))\n"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

var statusLine = regexp.MustCompile(`pylsp for root [^\n]*?pid (\d+)`)

// firstHover runs one run on dir: its first hover, timed, how its server
// came (lsp status) and its pid; the run then ends, parking the server.
// With shutdown, the parked servers end first, so the run starts cold.
func (b *bench) firstHover(dir, id string, shutdown bool) (time.Duration, string, int, error) {
	if shutdown {
		b.p.Shutdown()
		p, err := lsp.New(b.conf, b.m)
		if err != nil {
			return 0, "", 0, err
		}
		b.p = p
		b.reg = orchestrator.NewRegistry(b.m, 0)
		b.reg.Add(p)
	}
	run := orchestrator.NewRun(id, "bench", dir, host.New(), nil, nil)
	defer run.End(orchestrator.EndStopped)
	start := time.Now()
	if _, err := b.call(run, map[string]any{"action": "hover", "file": "m.py", "line": 4, "symbol": "twice"}); err != nil {
		return 0, "", 0, err
	}
	d := time.Since(start)
	st, err := b.call(run, map[string]any{"action": "status"})
	if err != nil {
		return 0, "", 0, err
	}
	how := "cold"
	if strings.Contains(st, "by an earlier run") {
		how = "adopted"
	}
	mm := statusLine.FindStringSubmatch(st)
	if mm == nil {
		return 0, "", 0, fmt.Errorf("no pylsp pid in status:\n%s", st)
	}
	pid, _ := strconv.Atoi(mm[1])
	return d, how, pid, nil
}

func (b *bench) call(run *orchestrator.Run, a map[string]any) (string, error) {
	raw, _ := json.Marshal(a)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := b.reg.Call(ctx, run, orchestrator.SurfaceFull, "lsp", raw)
	if err != nil {
		return "", err
	}
	var parts []string
	for _, c := range res.Content {
		parts = append(parts, c.Text)
	}
	text := strings.Join(parts, "\n")
	if res.IsError {
		return "", fmt.Errorf("lsp %v: %s", a, text)
	}
	return text, nil
}

// parked is a server whose run has ended, when, and when it was gone.
type parked struct {
	pid      int
	at, gone time.Time
}

// liveRSS is the resident memory of the servers in all still running,
// read in /proc.
func liveRSS(all []*parked) int64 {
	var n int64
	for _, s := range all {
		if r, ok := procfs.TreeRSS(s.pid); ok {
			n += r
		}
	}
	return n
}
