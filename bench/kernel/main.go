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
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/berth-dev/berth/enclosure/relay/relaytest"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

//go:embed ipykernel.py
var ipykernelScript string

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
	start() (time.Duration, error)
	rounds(n int) ([]time.Duration, error)
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
	ipy, err := newIPyKernel(python)
	if err != nil {
		return fmt.Errorf("ipykernel: %w", err)
	}
	defer ipy.close()

	sides := []side{b, ipy}
	startTimes := make([][]time.Duration, 2)
	roundTimes := make([][]time.Duration, 2)
	for range starts {
		for i, s := range sides {
			d, err := s.start()
			if err != nil {
				return err
			}
			startTimes[i] = append(startTimes[i], d)
		}
	}
	for _, s := range sides { // warm up
		if _, err := s.rounds(1); err != nil {
			return err
		}
	}
	for done := 0; done < rounds; done += batch {
		for i, s := range sides {
			d, err := s.rounds(min(batch, rounds-done))
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
		fmt.Printf("%-28s %12s %12s %7.3fx ≤%.1fx %s\n", name, ms(b), ms(i), ratio, target, verdict)
	}
	row("start (median)", pct(startTimes[0], 50), pct(startTimes[1], 50), 0.1)
	row("round trip 1+1 (median)", pct(roundTimes[0], 50), pct(roundTimes[1], 50), 0.2)
	row("round trip 1+1 (p90)", pct(roundTimes[0], 90), pct(roundTimes[1], 90), 0.2)
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

func (b *berth) start() (time.Duration, error) { return b.cell(true) }

func (b *berth) rounds(n int) ([]time.Duration, error) {
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

// ipyKernel drives the jupyter_client script by its stdin commands.
type ipyKernel struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *strings.Builder
}

func newIPyKernel(python string) (*ipyKernel, error) {
	cmd := exec.Command(python, "-c", ipykernelScript)
	// ipykernel's debugger warns about frozen modules on every start:
	// shown only if the script fails.
	k := &ipyKernel{cmd: cmd, stderr: &strings.Builder{}}
	cmd.Stderr = k.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	k.in, k.out = in, bufio.NewReader(out)
	return k, nil
}

func (k *ipyKernel) ask(command string, v any) error {
	if _, err := fmt.Fprintln(k.in, command); err != nil {
		return err
	}
	line, err := k.out.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("%s: %v\n%s", command, err, k.stderr.String())
	}
	return json.Unmarshal(line, v)
}

func (k *ipyKernel) start() (time.Duration, error) {
	var s float64
	err := k.ask("start", &s)
	return seconds(s), err
}

func (k *ipyKernel) rounds(n int) ([]time.Duration, error) {
	var s []float64
	if err := k.ask(fmt.Sprintf("rounds %d", n), &s); err != nil {
		return nil, err
	}
	out := make([]time.Duration, len(s))
	for i, v := range s {
		out[i] = seconds(v)
	}
	return out, nil
}

func (k *ipyKernel) close() {
	_, _ = fmt.Fprintln(k.in, "quit")
	_ = k.in.Close()
	_ = k.cmd.Wait()
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

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
		if filepath.Dir(d) == d {
			return dir
		}
	}
}
