// Command astgrep measures Berth's ast_grep against the ast-grep CLI on
// Go's own source tree, in one run. For each pattern it runs ast-grep
// once, then asks Berth (the real orchestrator binary, over the harness
// protocol on stdio) twice in a fresh run: the first call is cold (no
// parsed trees), the second is the same query again (warm: the run's
// tree cache). It prints the match counts of both tools, the wall times,
// and the ratios Berth/ast-grep. ast-grep goes first for each pattern, so
// the files are in the OS cache for both. Each figure is the best of -n
// tries (fresh runs for the cold ones), since other work on the machine
// only ever adds time.
//
// Run it through bench/astgrep.sh, which installs ast-grep and builds the
// binary.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// patterns are queries whose meaning both tools share, and one they do
// not: ast-grep 0.51 parses `fmt.Errorf($$$A)` at the top level of Go as
// a type conversion and finds nothing.
var patterns = []string{
	"defer $X.Close()",
	"if err != nil { return $$$R }",
	"$X.Lock()",
	"for $K, $V := range $M { $$$B }",
	"go func() { $$$B }()",
	"make([]byte, $N)",
	"fmt.Errorf($$$A)",
}

var tries int

func main() {
	binary := flag.String("binary", "", "the orchestrator binary (bench/astgrep.sh builds one)")
	root := flag.String("root", filepath.Join(runtime.GOROOT(), "src"), "tree to search")
	astgrep := flag.String("ast-grep", "ast-grep", "the ast-grep CLI")
	flag.IntVar(&tries, "n", 3, "tries per figure; the best counts")
	flag.Parse()
	if *binary == "" {
		fmt.Fprintln(os.Stderr, "astgrep: -binary is required (run bench/astgrep.sh)")
		os.Exit(2)
	}
	if err := run(*binary, *root, *astgrep); err != nil {
		fmt.Fprintln(os.Stderr, "astgrep:", err)
		os.Exit(1)
	}
}

func run(binary, root, astgrep string) error {
	ctx := context.Background()
	version, err := exec.Command(astgrep, "--version").Output()
	if err != nil {
		return fmt.Errorf("%s: %w", astgrep, err)
	}
	c, err := rpc.DialCommand(exec.Command(binary, "serve", "--stdio"), rpc.ClientOptions{})
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Initialize(ctx, "bench-astgrep", "1"); err != nil {
		return err
	}
	fmt.Printf("tree: %s (%d .go files); %s; %d CPUs; best of %d tries\n\n", root, countGoFiles(root), strings.TrimSpace(string(version)), runtime.NumCPU(), tries)

	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "pattern\tast-grep\tBerth\tast-grep s\tcold s\twarm s\tcold ×\twarm ×\t")
	var coldLog, warmLog, coldAll float64
	agreed := 0
	for _, p := range patterns {
		var agN, bN int
		agT, coldT, warmT := time.Duration(math.MaxInt64), time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
		for i := 0; i < tries; i++ {
			n, d, err := runAstGrep(astgrep, root, p)
			if err != nil {
				return err
			}
			agN, agT = n, min(agT, d)
			r, err := c.StartRun(ctx, rpc.StartRunParams{Workdir: root})
			if err != nil {
				return err
			}
			n1, d1, err := runBerth(ctx, c, r.RunID, p)
			if err != nil {
				return err
			}
			n2, d2, err := runBerth(ctx, c, r.RunID, p)
			if err != nil {
				return err
			}
			if err := c.StopRun(ctx, r.RunID); err != nil {
				return err
			}
			if n2 != n1 {
				return fmt.Errorf("%s: the warm query found %d matches, the cold one %d", p, n2, n1)
			}
			bN, coldT, warmT = n1, min(coldT, d1), min(warmT, d2)
		}
		cold, warm := coldT.Seconds()/agT.Seconds(), warmT.Seconds()/agT.Seconds()
		coldAll += math.Log(cold)
		note := ""
		if agN == bN {
			agreed++
			coldLog += math.Log(cold)
			warmLog += math.Log(warm)
		} else {
			note = "  (counts differ)"
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%.2f\t%.2f\t%.3f\t%.2f\t%.3f\t%s\n", p, agN, bN, agT.Seconds(), coldT.Seconds(), warmT.Seconds(), cold, warm, note)
	}
	w.Flush()
	if agreed > 0 {
		fmt.Printf("\ngeometric mean over the %d patterns where the counts agree: cold %.2f× ast-grep's wall time (target ≤ 0.7), warm %.3f× (target ≤ 0.1)\n",
			agreed, math.Exp(coldLog/float64(agreed)), math.Exp(warmLog/float64(agreed)))
	}
	// Where the counts differ the work is still the same walk and parse,
	// so the cold figure over every pattern says something too.
	fmt.Printf("geometric mean of cold over all %d patterns: %.2f×\n", len(patterns), math.Exp(coldAll/float64(len(patterns))))
	return nil
}

// runAstGrep counts ast-grep's matches (one JSON object a line).
func runAstGrep(astgrep, root, pattern string) (int, time.Duration, error) {
	cmd := exec.Command(astgrep, "run", "--pattern", pattern, "--lang", "go", "--json=stream", root)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	// ast-grep exits 1 when it finds nothing.
	if err != nil && out.Len() > 0 {
		return 0, d, fmt.Errorf("ast-grep %q: %v: %s", pattern, err, errb.String())
	}
	return bytes.Count(out.Bytes(), []byte("\n")), d, nil
}

var countRE = regexp.MustCompile(`^(\d+) match\(es\)|^no matches`)

// runBerth calls ast_grep once and returns its match count.
func runBerth(ctx context.Context, c *rpc.Client, runID, pattern string) (int, time.Duration, error) {
	start := time.Now()
	res, err := c.CallTool(ctx, runID, orchestrator.SurfaceFull, "ast_grep", map[string]any{"pattern": pattern, "language": "go", "max_results": 1})
	d := time.Since(start)
	if err != nil {
		return 0, d, err
	}
	if res.IsError {
		return 0, d, fmt.Errorf("ast_grep %q: %s", pattern, res.FirstText())
	}
	m := countRE.FindStringSubmatch(res.FirstText())
	if m == nil {
		return 0, d, fmt.Errorf("ast_grep %q: no count in %q", pattern, res.FirstText())
	}
	n, _ := strconv.Atoi(m[1])
	return n, d, nil
}

func countGoFiles(root string) int {
	n := 0
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".go") {
			n++
		}
		return nil
	})
	return n
}
