// Command debug measures what Berth adds to starting a debug session: the
// time from launch to the first breakpoint stop through the real
// orchestrator binary (built from ./cmd/orchestrator and started as
// "orchestrator serve --stdio --config FILE", driven with the Go client of
// the harness protocol: tools/call over stdio, dispatch, detection, the
// session's handshake, the stop's location) against the same DAP exchange
// sent straight to the adapter by a minimal client, for debugpy and delve,
// in one run. Runs alternate between the two so that caches warm both
// alike; it prints medians, their ratio, the median of the per-pair
// ratios, and the minimum of each.
//
// Usage: go run ./bench/debug [-n 10] [-python /usr/bin/python3]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/berth-dev/berth/bench/internal/stats"
	"github.com/berth-dev/berth/orchestrator/debug"
)

// project is one adapter's fixture: files, the program, the breakpoint.
type project struct {
	adapter string
	files   map[string]string
	program string
	file    string
	line    int
}

var projects = []project{
	{
		adapter: "debugpy", program: "app.py", file: "app.py", line: 3,
		files: map[string]string{
			"requirements.txt": "# none\n",
			"app.py":           "def main():\n    name = \"berth\"\n    print(\"hello\", name)\n\n\nmain()\n",
		},
	},
	{
		adapter: "delve", program: ".", file: "main.go", line: 7,
		files: map[string]string{
			"go.mod":  "module example.com/app\n\ngo 1.22\n",
			"main.go": "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tname := \"berth\"\n\tfmt.Println(\"hello\", name)\n}\n",
		},
	},
}

func main() {
	n := flag.Int("n", 10, "measured launches per adapter and path")
	python := flag.String("python", "/usr/bin/python3", "interpreter with debugpy")
	flag.Parse()
	if err := run(*n, *python); err != nil {
		fmt.Fprintln(os.Stderr, "bench/debug:", err)
		os.Exit(1)
	}
}

func run(n int, python string) error {
	cfg := debug.DefaultConfig()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	srv, err := startServer(ctx, python)
	if err != nil {
		return err
	}
	defer srv.close()
	fmt.Printf("launch to first breakpoint stop, %d runs each (after one warm-up), medians\n", n)
	fmt.Println("direct: the DAP exchange sent straight to the adapter; berth: tools/call debug launch to the orchestrator binary over stdio")
	fmt.Printf("%-8s %12s %12s %8s %8s %14s\n", "adapter", "direct", "berth", "ratio", "added", "paired ratio")
	for _, pr := range projects {
		dir, err := os.MkdirTemp("", "berth-bench-debug-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		dir, _ = filepath.EvalSymlinks(dir)
		for name, body := range pr.files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				return err
			}
		}
		a := adapterConfig(cfg, pr.adapter)
		var direct, berth []time.Duration
		for i := 0; i <= n; i++ {
			var d, b time.Duration
			var derr, berr error
			// Alternate which goes first, so neither always runs just
			// after the other's teardown.
			if i%2 == 0 {
				d, derr = directLaunch(a, python, dir, pr)
				b, berr = srv.launch(ctx, dir, pr)
			} else {
				b, berr = srv.launch(ctx, dir, pr)
				d, derr = directLaunch(a, python, dir, pr)
			}
			if derr != nil {
				return fmt.Errorf("%s direct: %w", pr.adapter, derr)
			}
			if berr != nil {
				return fmt.Errorf("%s through Berth: %w", pr.adapter, berr)
			}
			if i > 0 { // the first of each is the warm-up
				direct, berth = append(direct, d), append(berth, b)
			}
		}
		md, mb := stats.Median(direct), stats.Median(berth)
		ratio := float64(mb) / float64(md)
		// The median of each pair's ratio (the two ran back to back) is
		// steadier than the ratio of medians on a loaded machine.
		var paired []float64
		for i := range direct {
			paired = append(paired, float64(berth[i])/float64(direct[i]))
		}
		slices.Sort(paired)
		fmt.Printf("%-8s %12s %12s %8.3f %7.1f%% %14.3f   (min %s / %s)\n", pr.adapter, md.Round(time.Millisecond), mb.Round(time.Millisecond),
			ratio, (ratio-1)*100, paired[len(paired)/2], slices.Min(direct).Round(time.Millisecond), slices.Min(berth).Round(time.Millisecond))
	}
	return nil
}

func adapterConfig(cfg debug.Config, id string) debug.Adapter {
	for _, a := range cfg.Adapters {
		if a.ID == id {
			return a
		}
	}
	panic("no adapter " + id)
}
