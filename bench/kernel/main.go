// Command kernel benchmarks eval against the alternative a user would
// pick, ipykernel driven through jupyter_client, in one run: kernel start
// time, and the median and 90th-percentile round trip of the cell "1+1".
// Berth is measured end to end, through the real orchestrator binary over
// stdio with the Go rpc client (the path a harness takes); both kernels
// run Debian's /usr/bin/python3. The two are measured in alternating
// batches, so both see the same load on a shared machine.
//
//	go run ./bench/kernel [-starts 5] [-rounds 200] [-python /usr/bin/python3]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/berth-dev/berth/bench/internal/ipykernel"
	"github.com/berth-dev/berth/bench/internal/stats"
	"github.com/berth-dev/berth/enclosure/relay/relaytest"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// batch is how many round trips one side runs before the other's turn.
const batch = 20

func main() {
	starts := flag.Int("starts", 5, "kernel starts to measure")
	rounds := flag.Int("rounds", 200, "1+1 round trips to measure")
	python := flag.String("python", "/usr/bin/python3", "interpreter for both kernels (needs ipykernel and jupyter_client)")
	flag.Parse()
	if err := bench(*starts, *rounds, *python); err != nil {
		fmt.Fprintln(os.Stderr, "bench/kernel:", err)
		os.Exit(1)
	}
}

// side is one kernel under test.
type side interface {
	Start() (time.Duration, error)
	Rounds(n int) ([]time.Duration, error)
}

func bench(starts, rounds int, python string) error {
	tmp, err := os.MkdirTemp("", "berth-bench-kernel-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	b, err := newBerth(tmp, python)
	if err != nil {
		return fmt.Errorf("berth: %w", err)
	}
	defer b.close()
	ipy, err := ipykernel.New(python)
	if err != nil {
		return fmt.Errorf("ipykernel: %w", err)
	}
	defer ipy.Close()

	sides := []side{b, ipy}
	startTimes := make([][]time.Duration, 2)
	roundTimes := make([][]time.Duration, 2)
	for range starts {
		for i, s := range sides {
			d, err := s.Start()
			if err != nil {
				return err
			}
			startTimes[i] = append(startTimes[i], d)
		}
	}
	for _, s := range sides { // warm up
		if _, err := s.Rounds(1); err != nil {
			return err
		}
	}
	for done := 0; done < rounds; done += batch {
		for i, s := range sides {
			d, err := s.Rounds(min(batch, rounds-done))
			if err != nil {
				return err
			}
			roundTimes[i] = append(roundTimes[i], d...)
		}
	}

	fmt.Printf("kernel start and 1+1 round trip, %s, %d starts, %d round trips (alternating batches of %d)\n\n", python, starts, rounds, batch)
	fmt.Printf("%-28s %12s %12s %8s %s\n", "", "berth", "ipykernel", "ratio", "target")
	row := func(name string, b, i time.Duration, target float64) {
		ratio := float64(b) / float64(i)
		verdict := "met"
		if ratio > target {
			verdict = "MISSED"
		}
		fmt.Printf("%-28s %12s %12s %7.3fx ≤%.1fx %s\n", name, stats.MS(b), stats.MS(i), ratio, target, verdict)
	}
	row("start (median)", stats.Percentile(startTimes[0], 50), stats.Percentile(startTimes[1], 50), 0.1)
	row("round trip 1+1 (median)", stats.Percentile(roundTimes[0], 50), stats.Percentile(roundTimes[1], 50), 0.2)
	row("round trip 1+1 (p90)", stats.Percentile(roundTimes[0], 90), stats.Percentile(roundTimes[1], 90), 0.2)
	return nil
}

// berth is the orchestrator binary served over stdio. A start is a cell
// with reset (the old kernel discarded, a fresh one started, "1+1" run),
// a round trip a warm "1+1".
type berth struct {
	c   *rpc.Client
	ctx context.Context
	run string
}

func newBerth(tmp, python string) (*berth, error) {
	bin := filepath.Join(tmp, "orchestrator")
	build := exec.Command("go", "build", "-tags", "berthtest", "-o", bin, "./cmd/orchestrator")
	build.Dir = moduleRoot()
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build: %v\n%s", err, out)
	}
	// The relay every host process runs under, next to the binary.
	if _, err := relaytest.Build(tmp); err != nil {
		return nil, err
	}
	cfg := filepath.Join(tmp, "berth.yaml")
	if err := os.WriteFile(cfg, []byte("kernels:\n  python: "+python+"\n"), 0o600); err != nil {
		return nil, err
	}
	work := filepath.Join(tmp, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		return nil, err
	}
	c, err := rpc.DialCommand(exec.Command(bin, "serve", "--stdio", "--config", cfg), rpc.ClientOptions{})
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	if _, err := c.Initialize(ctx, "bench-kernel", "1"); err != nil {
		c.Close()
		return nil, err
	}
	run, err := c.StartRun(ctx, rpc.StartRunParams{Workdir: work})
	if err != nil {
		c.Close()
		return nil, err
	}
	return &berth{c: c, ctx: ctx, run: run.RunID}, nil
}

func (b *berth) cell(reset bool) (time.Duration, error) {
	args := map[string]any{"code": "1+1", "description": "add one and one for the benchmark", "reset": reset}
	t0 := time.Now()
	res, err := b.c.CallTool(b.ctx, b.run, orchestrator.SurfaceFull, "eval", args)
	d := time.Since(t0)
	if err != nil {
		return 0, err
	}
	if res.IsError || len(res.Content) == 0 || res.Content[0].Text != "2" {
		return 0, fmt.Errorf("1+1 gave %+v", res.Content)
	}
	return d, nil
}

func (b *berth) Start() (time.Duration, error) { return b.cell(true) }

func (b *berth) Rounds(n int) ([]time.Duration, error) {
	var out []time.Duration
	for range n {
		d, err := b.cell(false)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func (b *berth) close() {
	_ = b.c.StopRun(b.ctx, b.run)
	_ = b.c.Close()
}

// moduleRoot finds the directory holding go.mod, from the working
// directory up.
func moduleRoot() string {
	dir, _ := os.Getwd()
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return dir
		}
	}
}
