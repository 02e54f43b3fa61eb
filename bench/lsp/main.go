// Command lsp measures what Berth adds to a language-server query: the
// same definition and references requests on this repository, sent
// through Berth's harness protocol (the real orchestrator binary over
// stdio, the client from orchestrator/rpc, the lsp tool, gopls) and sent
// straight to a second gopls by a minimal client (direct.go), alternating
// so both stay equally warm. To split what Berth adds, it also times the
// same tool call made in process (the registry and the lsp provider, no
// protocol; on a third gopls) and a protocol round trip alone (test_echo
// of the same answer). Last it times files/didWrite on a warm server
// against the direct time from didChange to gopls's first publish. It
// prints medians, their ratio and the added time.
//
// Usage: go run ./bench/lsp [-n 30] [-repo .]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/lsp"
	"github.com/berth-dev/berth/orchestrator/metrics"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// query is one request: a file of the repository and the line holding
// symbol (the first line that contains find).
type query struct {
	action string
	file   string
	find   string
	symbol string
}

var queries = []query{
	{"definition", "orchestrator/registry.go", "return Errorf(\"tool %s (tier %s)", "Errorf"},
	{"references", "orchestrator/result.go", "func Errorf(", "Errorf"},
}

func main() {
	n := flag.Int("n", 30, "measured requests per query and path")
	repo := flag.String("repo", ".", "the Go module to query (this repository)")
	flag.Parse()
	if err := run(*n, *repo); err != nil {
		fmt.Fprintln(os.Stderr, "bench/lsp:", err)
		os.Exit(1)
	}
}

func run(n int, repo string) error {
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
	build := exec.Command("go", "build", "-o", bin, "./cmd/orchestrator")
	build.Dir, build.Stdout, build.Stderr = repo, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building the orchestrator: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	cmd := exec.Command(bin, "serve", "--stdio")
	cmd.Env = append(os.Environ(), "BERTH_TEST_TOOLS=1") // test_echo, to time the protocol alone
	cmd.Stderr = os.Stderr
	c, err := rpc.DialCommand(cmd, rpc.ClientOptions{})
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Initialize(ctx, "bench-lsp", "0"); err != nil {
		return err
	}
	r, err := c.StartRun(ctx, rpc.StartRunParams{Workdir: repo})
	if err != nil {
		return err
	}
	defer c.StopRun(context.Background(), r.RunID)

	d, err := startDirect(ctx, repo)
	if err != nil {
		return err
	}
	defer d.close()
	inproc, err := newInProcess(repo)
	if err != nil {
		return err
	}
	defer inproc.run.End(orchestrator.EndStopped)

	fmt.Printf("gopls on %s, %d requests each after warm-up, alternating paths\n", repo, n)
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
		var answer string
		berthCall := func() (time.Duration, error) {
			start := time.Now()
			res, err := c.CallTool(ctx, r.RunID, orchestrator.SurfaceFull, "lsp", args)
			el := time.Since(start)
			if err == nil && res.IsError {
				err = fmt.Errorf("%s", res.FirstText())
			}
			if err == nil {
				answer = res.FirstText()
			}
			return el, err
		}
		directCall := func() (time.Duration, error) {
			return d.request(ctx, q.action, filepath.Join(repo, q.file), line-1, col)
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
		// The same tool call in process, against the direct request.
		var local, direct2 []time.Duration
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
		report("  in process", direct2, local)
		// The harness protocol alone: a tool that echoes the same answer.
		var echo []time.Duration
		for i := 0; i < n; i++ {
			start := time.Now()
			if _, err := c.CallTool(ctx, r.RunID, orchestrator.SurfaceFull, "test_echo", map[string]any{"text": answer}); err != nil {
				return err
			}
			echo = append(echo, time.Since(start))
		}
		fmt.Printf("%-13s %21s   the harness protocol round trip alone (test_echo of the %d-byte answer)\n", "  protocol", round(median(echo)), len(answer))
	}
	return didWrite(ctx, c, d, n)
}

// inProcess is the lsp provider behind a registry in this process, as
// the binary wires it, without the protocol.
type inProcess struct {
	reg *orchestrator.Registry
	run *orchestrator.Run
}

func newInProcess(repo string) (*inProcess, error) {
	m := metrics.NewForTest()
	p, err := lsp.New(lsp.DefaultConfig(), m)
	if err != nil {
		return nil, err
	}
	reg := orchestrator.NewRegistry(m, 0)
	reg.Add(p)
	return &inProcess{reg: reg, run: orchestrator.NewRun("bench", "", repo, enclosure.Host(), nil, nil)}, nil
}

func (ip *inProcess) call(ctx context.Context, args map[string]any) (time.Duration, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	res, err := ip.reg.Call(ctx, ip.run, orchestrator.SurfaceFull, "lsp", raw)
	el := time.Since(start)
	if err == nil && res.IsError {
		err = fmt.Errorf("%s", res.FirstText())
	}
	return el, err
}

// didWrite times files/didWrite on a warm server against the direct time
// from didChange+didSave to gopls's first publish, on a scratch copy of a
// small module (never in the repository).
func didWrite(ctx context.Context, c *rpc.Client, d *direct, n int) error {
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
	wd, err := startDirect(ctx, dir)
	if err != nil {
		return err
	}
	defer wd.close()
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
		a, err := wd.write(ctx, path, body)
		if err != nil {
			return err
		}
		if i >= 0 {
			direct, berth = append(direct, a), append(berth, b)
		}
	}
	fmt.Println()
	fmt.Println("files/didWrite on a warm gopls: direct is didChange+didSave to the first publish; Berth also")
	fmt.Println("waits out its debounce (500ms of quiet, for follow-up publishes) before it answers")
	report("didWrite", direct, berth)
	return nil
}

// report prints medians, their ratio, and the median of the per-pair
// differences (the two requests of a pair ran back to back, so the pair
// difference is steadier than a difference of medians on a loaded
// machine); the target is judged on the pair difference.
func report(name string, direct, berth []time.Duration) {
	md, mb := median(direct), median(berth)
	var diffs []time.Duration
	for i := range direct {
		diffs = append(diffs, berth[i]-direct[i])
	}
	added := median(diffs)
	verdict := "met"
	if added > max(md/10, time.Millisecond) {
		verdict = "MISSED"
	}
	if name == "didWrite" {
		verdict = "(not a query: no target)"
	}
	fmt.Printf("%-13s %10s %10s %8.3f %10s   %s (min %s / %s)\n", name, round(md), round(mb), float64(mb)/float64(md), round(added), verdict,
		round(slices.Min(direct)), round(slices.Min(berth)))
}

func round(d time.Duration) time.Duration {
	if d < 10*time.Millisecond && d > -10*time.Millisecond {
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(100 * time.Microsecond)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func lineOf(text, find string) int {
	for i, l := range strings.Split(text, "\n") {
		if strings.Contains(l, find) {
			return i + 1
		}
	}
	return 0
}
