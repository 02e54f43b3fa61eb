// Command kernel benchmarks eval against the alternative a user would
// pick, ipykernel driven through jupyter_client, in one run: kernel start
// time, and the median and 90th-percentile round trip of the cell "1+1".
// Berth is measured end to end, through the real orchestrator binary over
// stdio with the Go rpc client (the path a harness takes); both kernels
// run Debian's /usr/bin/python3.
//
//	go run ./bench/kernel [-starts 5] [-rounds 200] [-python /usr/bin/python3]
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

//go:embed ipykernel.py
var ipykernelScript string

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

type figures struct {
	start, round []time.Duration
}

func bench(starts, rounds int, python string) error {
	tmp, err := os.MkdirTemp("", "berth-bench-kernel-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	berth, err := benchBerth(tmp, python, starts, rounds)
	if err != nil {
		return fmt.Errorf("berth: %w", err)
	}
	ipy, err := benchIPyKernel(python, starts, rounds)
	if err != nil {
		return fmt.Errorf("ipykernel: %w", err)
	}

	fmt.Printf("kernel start and 1+1 round trip, %s, %d starts, %d round trips\n\n", python, starts, rounds)
	fmt.Printf("%-28s %12s %12s %8s %s\n", "", "berth", "ipykernel", "ratio", "target")
	row := func(name string, b, i time.Duration, target float64) {
		ratio := float64(b) / float64(i)
		verdict := "met"
		if ratio > target {
			verdict = "MISSED"
		}
		fmt.Printf("%-28s %12s %12s %7.3fx ≤%.1fx %s\n", name, ms(b), ms(i), ratio, target, verdict)
	}
	row("start (median)", pct(berth.start, 50), pct(ipy.start, 50), 0.1)
	row("round trip 1+1 (median)", pct(berth.round, 50), pct(ipy.round, 50), 0.2)
	row("round trip 1+1 (p90)", pct(berth.round, 90), pct(ipy.round, 90), 0.2)
	return nil
}

// benchBerth builds the orchestrator, serves it over stdio, and times
// eval: a start is a cell with reset (the old kernel is discarded, a
// fresh one started and "1+1" run), a round trip a warm "1+1".
func benchBerth(tmp, python string, starts, rounds int) (figures, error) {
	bin := filepath.Join(tmp, "orchestrator")
	build := exec.Command("go", "build", "-o", bin, "./cmd/orchestrator")
	build.Dir = moduleRoot()
	if out, err := build.CombinedOutput(); err != nil {
		return figures{}, fmt.Errorf("go build: %v\n%s", err, out)
	}
	cfg := filepath.Join(tmp, "berth.yaml")
	if err := os.WriteFile(cfg, []byte("kernels:\n  python: "+python+"\n"), 0o600); err != nil {
		return figures{}, err
	}
	work := filepath.Join(tmp, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		return figures{}, err
	}
	c, err := rpc.DialCommand(exec.Command(bin, "serve", "--stdio", "--config", cfg), rpc.ClientOptions{})
	if err != nil {
		return figures{}, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := c.Initialize(ctx, "bench-kernel", "1"); err != nil {
		return figures{}, err
	}
	run, err := c.StartRun(ctx, rpc.StartRunParams{Workdir: work})
	if err != nil {
		return figures{}, err
	}
	cell := func(reset bool) (time.Duration, error) {
		args := map[string]any{"code": "1+1", "description": "add one and one for the benchmark", "reset": reset}
		t0 := time.Now()
		res, err := c.CallTool(ctx, run.RunID, orchestrator.SurfaceFull, "eval", args)
		d := time.Since(t0)
		if err != nil {
			return 0, err
		}
		if res.IsError || len(res.Content) == 0 || res.Content[0].Text != "2" {
			return 0, fmt.Errorf("1+1 gave %+v", res.Content)
		}
		return d, nil
	}
	var f figures
	for range starts {
		d, err := cell(true)
		if err != nil {
			return f, err
		}
		f.start = append(f.start, d)
	}
	if _, err := cell(false); err != nil { // warm up, as for ipykernel
		return f, err
	}
	for range rounds {
		d, err := cell(false)
		if err != nil {
			return f, err
		}
		f.round = append(f.round, d)
	}
	return f, c.StopRun(ctx, run.RunID)
}

// benchIPyKernel runs the jupyter_client script and reads its figures.
func benchIPyKernel(python string, starts, rounds int) (figures, error) {
	cmd := exec.Command(python, "-c", ipykernelScript, fmt.Sprint(starts), fmt.Sprint(rounds))
	// ipykernel's debugger warns about frozen modules on every start:
	// shown only if the script fails.
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return figures{}, fmt.Errorf("%s: %w\n%s", python, err, stderr.String())
	}
	var raw struct{ Start, Round []float64 }
	if err := json.Unmarshal(out, &raw); err != nil {
		return figures{}, fmt.Errorf("reading %q: %w", out, err)
	}
	conv := func(s []float64) []time.Duration {
		d := make([]time.Duration, len(s))
		for i, v := range s {
			d[i] = time.Duration(v * float64(time.Second))
		}
		return d
	}
	return figures{start: conv(raw.Start), round: conv(raw.Round)}, nil
}

// pct is the p-th percentile (nearest rank).
func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// moduleRoot finds the directory holding go.mod, from the working
// directory up.
func moduleRoot() string {
	dir, _ := os.Getwd()
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d || strings.TrimSpace(d) == "" {
			return dir
		}
	}
}
