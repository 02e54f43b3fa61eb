package deploy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/procfs"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// liveConfig gives every timeout the workload waits for a second scale:
// the eval cell's idle budget, the kernel's idle timeout, the debug
// session's TTL, the grace a closed connection's runs get, and the
// reaper's interval. No prewarm: the workload starts each server it
// counts (a prewarmed pylsp would end as a second disconnected session).
const liveConfig = `runs:
  reaper_interval: 1s
  disconnect_grace: 1s
kernels:
  python: /usr/bin/python3
  cell_idle_budget: 1s
  interrupt_grace: 3s
  idle_timeout: 2s
debug:
  python: /usr/bin/python3
  session_ttl: 3s
lsp:
  prewarm_max: 0
`

// liveTree is the run's workdir: a Go module for gopls, a Python program
// for debugpy that runs until its session's TTL ends it.
var liveTree = map[string]string{
	"go.mod":           "module example.com/live\n\ngo 1.22\n",
	"main.go":          "package main\n\nimport \"fmt\"\n\nfunc greet() string { return \"hi\" }\n\nfunc main() { fmt.Println(greet()) }\n",
	"wait.py":          "import time\ntime.sleep(120)\n",
	"requirements.txt": "# none: marks the root of a Python project for debugpy\n",
}

// Issue 15 item 4: a real Prometheus (Debian's binary) scrapes a real
// Berth every second while a workload goes through the protocol: runs,
// tool calls, an error, a process that cannot start, a tool() bridge
// call, an eval cell interrupted by its idle budget, the kernel culled by
// kernels.idle_timeout, a debug session ended by its TTL, a language
// server killed and restarted, a connection that goes away with a server
// running. Then every dashboard panel's expression and every recording
// rule returns data through Prometheus's HTTP API, and the TTL, idle,
// crash, restart, interrupt, disconnect and enclosure series moved as
// the workload says.
func TestLivePrometheusAnswersEveryPanelAndRule(t *testing.T) {
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus is not on PATH: install Debian's prometheus package (scripts/setup does): %v", err)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	workdir := filepath.Join(tmp, "work")
	writeTree(t, workdir, liveTree)
	// Registered first, so it runs last, after Berth has stopped: nothing
	// it started is left running.
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		if left := procfs.In(workdir); len(left) > 0 {
			t.Errorf("processes left in the workdir after Berth stopped: %v", procfs.Strings(left))
		}
	})
	configFile := filepath.Join(tmp, "berth.yaml")
	writeFile(t, configFile, liveConfig)

	berth := startBerth(t, buildBerth(t), configFile)
	prom := startPrometheus(t, promBin, tmp, berth.addr)
	t.Logf("berth on %s, prometheus on %s, after %s", berth.addr, prom, time.Since(start).Round(time.Millisecond))

	c, err := rpc.DialWebSocket(ctx, "ws://"+berth.addr+rpc.RPCPath, berth.token, rpc.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.OnCallTool(func(context.Context, rpc.HarnessCallToolParams) (*orchestrator.Result, error) {
		return orchestrator.Text("from the harness"), nil
	})
	if _, err := c.Initialize(ctx, "berth-deploy-live", "test"); err != nil {
		t.Fatal(err)
	}
	r, err := c.StartRun(ctx, rpc.StartRunParams{Workdir: workdir, ConversationID: "conv-live"})
	if err != nil {
		t.Fatal(err)
	}
	run := r.RunID
	// As a harness does first.
	if _, err := c.ListTools(ctx, run, orchestrator.SurfaceFull); err != nil {
		t.Fatal(err)
	}
	call := func(name string, args any, wantError bool, want string) {
		t.Helper()
		res, err := c.CallTool(ctx, run, orchestrator.SurfaceFull, name, args)
		if err != nil {
			t.Fatalf("%s %v: %v", name, args, err)
		}
		got := resultText(res)
		if res.IsError != wantError || !strings.Contains(got, want) {
			t.Fatalf("%s %v: isError %v (want %v), want %q in:\n%s", name, args, res.IsError, wantError, want, got)
		}
	}
	call("test_echo", map[string]any{"text": "hello"}, false, "hello")
	call("test_panic", map[string]any{}, true, "internal error")
	call("test_exec", map[string]any{"argv": []string{"/nonexistent/berth-live"}}, true, "/nonexistent/berth-live")
	call("lsp", map[string]any{"action": "definition", "file": "missing.go", "line": 1, "symbol": "x"}, true, "missing.go")
	call("eval", map[string]any{"language": "python", "code": "tool('read', {'path': 'x'})", "description": "ask the harness to read a file"}, false, "from the harness")
	call("eval", map[string]any{"language": "python", "code": "import time\ntime.sleep(30)", "description": "sleep silently past the idle budget"}, true, "KeyboardInterrupt")
	call("debug", map[string]any{"operation": "launch", "program": "wait.py"}, false, "launched wait.py")
	call("lsp", map[string]any{"action": "definition", "file": "main.go", "line": 7, "symbol": "greet"}, false, "main.go:5")
	killed := killGopls(t, berth.pid)
	t.Logf("killed gopls (pid %d) after %s", killed, time.Since(start).Round(time.Millisecond))

	// The kernel idles out 2 s after its interrupted cell, the debug
	// session's TTL passes 3 s after its launch, and the watcher notes the
	// killed server; the next lsp call restarts it.
	for _, w := range []struct{ expr, why string }{
		{`berth_idle_timeouts_total{kind="kernel"}`, "the kernel culled by kernels.idle_timeout"},
		{`berth_ttl_expiries_total{kind="debug"}`, "the debug session ended by its TTL"},
		{`berth_session_ends_total{kind="lsp",reason="crashed"}`, "the killed language server"},
	} {
		waitFor(ctx, t, prom, w.expr+" >= 1", w.why)
	}
	call("lsp", map[string]any{"action": "definition", "file": "main.go", "line": 7, "symbol": "greet"}, false, "main.go:5")
	if err := c.StopRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	// A second harness connection goes away with a language server
	// running: after the grace its session ends as disconnected.
	c2, err := rpc.DialWebSocket(ctx, "ws://"+berth.addr+rpc.RPCPath, berth.token, rpc.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Initialize(ctx, "berth-deploy-live-2", "test"); err != nil {
		t.Fatal(err)
	}
	r2, err := c2.StartRun(ctx, rpc.StartRunParams{Workdir: workdir})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c2.CallTool(ctx, r2.RunID, orchestrator.SurfaceFull, "lsp", map[string]any{"action": "definition", "file": "main.go", "line": 7, "symbol": "greet"}); err != nil || res.IsError {
		t.Fatalf("lsp on the second connection: %v %+v", err, res)
	}
	c2.Close()

	for _, w := range []struct{ expr, why string }{
		{`berth_lsp_server_restarts_total{server="gopls"} >= 1`, "gopls restarted after the kill"},
		{`berth_cell_interrupts_total{outcome="interrupted"} >= 1`, "the cell interrupted by its idle budget"},
		{`berth_session_ends_total{kind="kernel",reason="idle"} >= 1`, "the kernel's end by idle timeout"},
		{`berth_session_ends_total{kind="debug",reason="ttl"} >= 1`, "the debug session's end by TTL"},
		{`berth_tool_calls_total{tool="test_panic",outcome="panic"} >= 1`, "the failed call"},
		{`berth_bridge_call_duration_seconds_count >= 1`, "the bridge call"},
		{`berth_enclosure_exec_duration_seconds_count{driver="host"} >= 3`, "processes started on the host"},
		{`berth_session_ends_total{kind="lsp",reason="disconnected"} >= 1`, "the second connection's server, after the grace"},
		{`berth_runs_active == 0`, "the runs ended"},
		// 2 s of evaluations after the last change, so every recording
		// rule has seen the workload.
		{`count_over_time(berth_runs_active[3s]) >= 2 and berth_runs_active == 0`, "scrapes after the run stopped"},
	} {
		waitFor(ctx, t, prom, w.expr, w.why)
	}
	for _, moved := range []string{`berth_ttl_expiries_total{kind="debug"}`, `berth_idle_timeouts_total{kind="kernel"}`,
		`berth_session_ends_total{kind="lsp",reason="crashed"}`, `berth_lsp_server_restarts_total{server="gopls"}`,
		`berth_cell_interrupts_total{outcome="interrupted"}`, `berth_session_ends_total{kind="lsp",reason="disconnected"}`,
		`berth_enclosure_errors_total{driver="host",op="start"}`} {
		// The workload does each once.
		if v := value(ctx, t, prom, moved); v != "1" {
			t.Errorf("%s = %s, want 1", moved, v)
		} else {
			t.Logf("moved: %s = %s", moved, v)
		}
	}
	time.Sleep(2 * time.Second) // two rule evaluations (every 1 s) after the last scrape checked

	// What Berth serves passes promtool's lint (names, units, help).
	lint := exec.Command(promtool(t), "check", "metrics")
	lint.Stdin = strings.NewReader(scrape(ctx, t, "http://"+berth.addr+"/metrics"))
	if out, err := lint.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}

	d, _ := loadDashboard(t)
	exprs := panelExprs(d)
	titles := sortedKeys(exprs)
	for _, title := range titles {
		for _, e := range exprs[title] {
			q := strings.NewReplacer(`"$job"`, `".+"`, `"$instance"`, `".+"`).Replace(e)
			n := query(ctx, t, prom, q)
			t.Logf("panel %-40s %3d series  %s", title, n, q)
			if n == 0 {
				t.Errorf("panel %q: %s returned no data", title, q)
			}
		}
	}
	for _, g := range loadRules(t).Groups {
		for _, rule := range g.Rules {
			if rule.Record == "" {
				continue
			}
			n := query(ctx, t, prom, rule.Record)
			t.Logf("rule  %-52s %3d series", rule.Record, n)
			if n == 0 {
				t.Errorf("recording rule %s has no data", rule.Record)
			}
		}
	}
	t.Logf("the live test took %s", time.Since(start).Round(time.Millisecond))
}

// berthProc is a running "orchestrator serve".
type berthProc struct {
	addr, token string
	pid         int
}

// buildBerth builds the orchestrator with -tags berthtest (the test-only
// tools: test_echo, test_panic), as e2e does, from Berth's own module:
// once, into builtDir, for every test that runs it.
func buildBerth(t *testing.T) string {
	t.Helper()
	bin, err := builtBerth()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

var builtBerth = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(builtDir, "orchestrator")
	cmd := exec.Command("go", "build", "-tags", "berthtest", "-o", bin, "./cmd/orchestrator")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the orchestrator: %v\n%s", err, out)
	}
	return bin, nil
})

var listeningRE = regexp.MustCompile(`listening on http://(\S+)`)

// startBerth starts "orchestrator serve" on a loopback port with a token
// file and the configuration, waits for its address, and stops it with
// SIGINT at cleanup.
func startBerth(t *testing.T, bin, configFile string) berthProc {
	t.Helper()
	token := "live-token"
	tokenFile := filepath.Join(filepath.Dir(configFile), "token")
	writeFile(t, tokenFile, token+"\n")
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--token-file", tokenFile, "--config", configFile)
	cmd.Env = append(os.Environ(), "BERTH_TEST_TOOLS=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	var log strings.Builder
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		stopAfter(t, cmd, 30*time.Second, "berth")
		<-copied
		if t.Failed() {
			t.Logf("berth's stderr:\n%s", log.String())
		}
	})
	select {
	case a := <-addr:
		return berthProc{addr: a, token: token, pid: cmd.Process.Pid}
	case <-time.After(60 * time.Second):
		t.Fatalf("berth printed no listening address in 60 s")
	}
	return berthProc{}
}

// startPrometheus starts Debian's prometheus on a free loopback port,
// scraping Berth at target every second and evaluating Berth's rules
// every second, and returns its base URL once it is ready.
func startPrometheus(t *testing.T, bin, dir, target string) string {
	t.Helper()
	rules, err := filepath.Abs(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "prometheus.yml")
	writeFile(t, conf, fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
rule_files:
  - %q
scrape_configs:
  - job_name: berth
    static_configs:
      - targets: [%q]
`, rules, target))
	addr := freePort(t)
	cmd := exec.Command(bin, "--config.file="+conf, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+addr, "--log.level=warn")
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		stopAfter(t, cmd, 30*time.Second, "prometheus")
		if t.Failed() {
			t.Logf("prometheus's log:\n%s", log.String())
		}
	})
	base := "http://" + addr
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get(base + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready in 30 s: %v\n%s", err, log.String())
		}
	}
}

// freePort returns a loopback address nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// stopAfter waits for cmd, killing it if it has not exited after d.
func stopAfter(t *testing.T, cmd *exec.Cmd, d time.Duration, name string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%s exited badly: %v", name, err)
		}
	case <-time.After(d):
		_ = cmd.Process.Kill()
		<-done
		t.Errorf("%s did not stop within %s", name, d)
	}
}

// killGopls kills the gopls Berth started, as a crash would.
func killGopls(t *testing.T, berthPID int) int {
	t.Helper()
	for _, pid := range procfs.Descendants(berthPID) {
		if p, ok := procfs.Read(pid); ok && strings.Contains(p.Cmdline(), "gopls") {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			return pid
		}
	}
	t.Fatalf("no gopls under berth (pid %d)", berthPID)
	return 0
}

// series is one series of an instant query's answer.
type series struct {
	Value [2]any `json:"value"`
}

// instant runs an instant query and returns its series.
func instant(ctx context.Context, t *testing.T, base, expr string) []series {
	t.Helper()
	body := get(ctx, t, base+"/api/v1/query?"+url.Values{"query": {expr}}.Encode())
	var out struct {
		Status string `json:"status"`
		Data   struct {
			Result []series `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &out); err != nil || out.Status != "success" {
		t.Fatalf("query %s: %v %s", expr, err, body)
	}
	return out.Data.Result
}

// query runs an instant query and returns how many series it returned.
func query(ctx context.Context, t *testing.T, base, expr string) int {
	t.Helper()
	return len(instant(ctx, t, base, expr))
}

// value is the value of expr's one series, for the log.
func value(ctx context.Context, t *testing.T, base, expr string) string {
	t.Helper()
	s := instant(ctx, t, base, expr)
	if len(s) != 1 {
		t.Fatalf("query %s: %d series, want 1", expr, len(s))
	}
	return fmt.Sprint(s[0].Value[1])
}

// scrape returns what url serves.
func scrape(ctx context.Context, t *testing.T, url string) string {
	t.Helper()
	return string(get(ctx, t, url))
}

// get returns the body url answers with; any other status than 200 fails
// the test, with the body (Prometheus's API says there what was wrong).
func get(ctx context.Context, t *testing.T, url string) []byte {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %v %s %s", url, err, resp.Status, b)
	}
	return b
}

// waitFor polls Prometheus until expr returns a series: the workload's
// effect has been scraped.
func waitFor(ctx context.Context, t *testing.T, base, expr, why string) {
	t.Helper()
	for ctx.Err() == nil {
		if query(ctx, t, base, expr) > 0 {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("%s: %s never held", why, expr)
}

func resultText(r *orchestrator.Result) string {
	var parts []string
	for _, b := range r.Content {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		writeFile(t, filepath.Join(dir, name), content)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
