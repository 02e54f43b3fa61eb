package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/orchestrator/rpc"
)

// What a process in the container can cost Berth's memory (issue 24 items
// 1 and 2): a fake language server and a fake debug adapter, run in the
// conversation's container as the real ones are (and a cell that writes
// to the kernel's protocol, TestContainersKernelFloodIsCapped), answer initialize, then
// write a header line that never ends ("Content-Length: 999..."), or
// declare a 1 GiB message and send its bytes. Berth's resident memory
// stays within floodBound of what it was before (its peak, VmHWM, is
// measured), the call fails within seconds with an error that names the
// server and what it sent, and Berth serves on. Before the readers in
// front of jsonrpc2 and go-dap, Berth buffered all that was sent: its
// RSS grew by the flood's size (and, for LSP's declared 1 GiB, by the
// gigabyte allocated at once) until the request timed out.

// floodBytes is how much the fakes write before they hang: enough to
// show an unbounded reader, little enough for a shared machine when one
// is run before the fix.
const floodBytes = 512 << 20

// floodBound is the growth of Berth's RSS the test allows.
const floodBound = 200 << 20

// fakePeer is a language server or a debug adapter (argv[1]: lsp or dap)
// that misbehaves at the request named by argv[2]'s mode (hover, launch).
const fakePeer = `import json, sys, time
role, mode, flood = sys.argv[1], sys.argv[2], int(sys.argv[3])
inp, out = sys.stdin.buffer, sys.stdout.buffer

def read():
    n = None
    while True:
        line = inp.readline()
        if not line:
            sys.exit(0)
        line = line.strip()
        if not line:
            break
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            n = int(v)
    return json.loads(inp.read(n))

def send(obj):
    b = json.dumps(obj).encode()
    out.write(b"Content-Length: %d\r\n\r\n" % len(b) + b)
    out.flush()

def misbehave():
    if mode == "endless-header":
        head, fill = b"Content-Length: ", b"9"
    else:
        head, fill = b"Content-Length: 1073741824\r\n\r\n", b" "
    chunk = fill * (1 << 20)
    try:
        out.write(head)
        for _ in range(flood >> 20):
            out.write(chunk)
        out.flush()
    except BrokenPipeError:
        sys.exit(0)
    while True:
        time.sleep(3600)

seq = 0
while True:
    m = read()
    if role == "lsp":
        method = m.get("method")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": m["id"], "result": {"capabilities": {"hoverProvider": True, "textDocumentSync": 1}}})
        elif method == "textDocument/hover":
            misbehave()
        elif method == "exit":
            sys.exit(0)
        elif "id" in m:
            send({"jsonrpc": "2.0", "id": m["id"], "result": None})
    else:
        seq += 1
        if m.get("command") == "initialize":
            send({"seq": seq, "type": "response", "request_seq": m["seq"], "success": True, "command": "initialize",
                  "body": {"supportsConfigurationDoneRequest": True}})
        elif m.get("command") == "launch":
            misbehave()
        else:
            send({"seq": seq, "type": "response", "request_seq": m["seq"], "success": True, "command": m.get("command")})
`

// startMeasured starts the binary with cfg (as YAML's JSON) and returns a
// client and the process's pid, to read its memory.
func startMeasured(t *testing.T, cfg map[string]any) (*rpc.Client, int) {
	t.Helper()
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "berth.yaml")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := command(nil, "serve", "--stdio", "--config", file)
	stderr := newStderr()
	cmd.Stderr = stderr
	c, err := rpc.DialCommand(cmd, rpc.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { awaitExit(t, cmd, stderr, c.Close) })
	if _, err := c.Initialize(testCtx(t), "berth-e2e", "test"); err != nil {
		t.Fatalf("initialize: %v\nstderr:\n%s", err, stderr.String())
	}
	return c, cmd.Process.Pid
}

// memory is a process's resident set now and at its peak (VmRSS, VmHWM),
// in bytes.
func memory(t *testing.T, pid int) (rss, peak int64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		name, value, _ := strings.Cut(line, ":")
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		switch name {
		case "VmRSS":
			rss = kb << 10
		case "VmHWM":
			peak = kb << 10
		}
	}
	return rss, peak
}

// floodCase is one way to misbehave and the error it must get.
type floodCase struct{ mode, lspWant, dapWant string }

var floodCases = []floodCase{
	{"endless-header",
		"fakelsp sent a header line with no line end within 4 KiB, so Berth stopped reading it and ended it; it is restarted on the next call",
		"the adapter sent a header line with no line end within 4 KiB, so Berth stopped reading it and ended the session"},
	{"huge-message",
		"fakelsp sent a message of 1 GiB (Content-Length 1073741824), over the limit of 64 MiB, so Berth stopped reading it and ended it; it is restarted on the next call; if its answers really are this large, raise lsp.max_message_bytes",
		"the adapter sent a message of 1 GiB (Content-Length 1073741824), over the limit of 4 MiB, so Berth stopped reading it and ended the session"},
}

// floodConfig configures the fakes, run with python3 in the container
// from the workdir, as the only language server and debug adapter.
func floodConfig(inside, mode string) map[string]any {
	script := inside + "/fakepeer.py"
	flood := strconv.Itoa(floodBytes)
	return map[string]any{
		"lsp": map[string]any{
			"request_timeout": "20s",
			"servers": []any{map[string]any{
				"name": "fakelsp", "languages": []string{"fake"}, "extensions": map[string]string{".fake": "fake"},
				"command": []string{"python3", script, "lsp", mode, flood}, "root_markers": []string{"fake.root"}, "ready": "none",
			}},
		},
		"debug": map[string]any{"adapters": []any{map[string]any{
			"id": "fakedap", "executables": []string{"python3"}, "args": []string{script, "dap", mode, flood},
			"transport": "stdio", "markers": []string{"fake.root"}, "extensions": []string{".fake"}, "adapter_id": "fake",
		}}},
	}
}

// checkFlood runs one case of one kind ("lsp" or "dap") in a fresh site
// of p with a binary of its own.
func checkFlood(t *testing.T, p place, kind string, fc floodCase) {
	s := p.fresh(t)
	writeTree(t, s.Dir, map[string]string{"fakepeer.py": fakePeer, "fake.root": "", "a.fake": "hello fake\n"})
	cfg := floodConfig(s.Inside, fc.mode)
	maps.Copy(cfg, kernelsSection)
	if p.engine == engineContainerd {
		maps.Copy(cfg, containerdSection.config)
	}
	c, pid := startMeasured(t, cfg)
	run := s.start(t, c, nil)
	// Berth at rest, with the run started: the baseline.
	callTool(t, c, run, "lsp", map[string]any{"action": "status"})
	base, _ := memory(t, pid)

	call, args, want := "lsp", map[string]any{"action": "hover", "file": "a.fake", "line": 1, "symbol": "hello"}, fc.lspWant
	switch kind {
	case "dap":
		call, args, want = "debug", map[string]any{"operation": "launch", "program": "a.fake"}, fc.dapWant
	case "kernel":
		call, args, want = "eval", map[string]any{"code": floodCell, "language": "python", "description": "write a frame that never ends to the protocol"}, kernelWant
	}
	start := time.Now()
	res := callTool(t, c, run, call, args)
	took := time.Since(start)
	// The fake may still be writing: give an unbounded reader time to
	// show itself before the peak is read.
	time.Sleep(2 * time.Second)
	rss, peak := memory(t, pid)
	t.Logf("%s %s in %s: Berth's RSS %d MiB at rest, peak %d MiB (+%d MiB), %d MiB after; the call took %s:\n%s",
		kind, fc.mode, p, base>>20, peak>>20, (peak-base)>>20, rss>>20, took.Round(time.Millisecond), text(res))
	if peak-base > floodBound {
		t.Errorf("Berth's RSS grew by %d MiB (peak %d MiB, from %d MiB): want under %d MiB", (peak-base)>>20, peak>>20, base>>20, floodBound>>20)
	}
	if !res.IsError || !strings.Contains(text(res), want) {
		t.Errorf("%s %v: want an error saying %q, got:\n%s", call, args, want, text(res))
	}
	if took > 10*time.Second {
		t.Errorf("the call took %s: it should fail as soon as the peer broke the limit", took)
	}
	// Berth serves on: the same call fails again the same way, at once,
	// and other tools answer.
	if res := callTool(t, c, run, call, args); !res.IsError || !strings.Contains(text(res), want) {
		t.Errorf("%s again: want %q, got:\n%s", call, want, text(res))
	}
	if res := callTool(t, c, run, "ast_grep", map[string]any{"pattern": "import $X", "language": "python", "path": "fakepeer.py"}); res.IsError || !strings.Contains(text(res), "match") {
		t.Errorf("ast_grep after the flood:\n%s", text(res))
	}
	if err := c.StopRun(testCtx(t), run); err != nil {
		t.Fatal(err)
	}
	s.waitNoProcesses(t, "run/stop")
}

// floodCell starts a frame on the kernel's protocol descriptor (the
// driver's _frames_out) and writes 512 MiB with no newline: a frame that
// never ends. Berth refuses it at the protocol's 64 MiB (bridge.MaxFrame)
// and stops the kernel.
const floodCell = `import os
fd = display.__globals__["_frames_out"]
chunk = b"x" * (1 << 20)
os.write(fd, b"\x1e{" + chunk)
for _ in range(512):
    os.write(fd, chunk)
`

const kernelWant = "it sent a message over the 64 MB limit of the protocol, so Berth stopped it"

// A cell that writes a frame without end to the kernel's protocol costs
// Berth at most the protocol's frame limit. Before the bridge kept a
// frame in pieces, its line grew by appending (365 MiB allocated for the
// 64 MiB refused).
func TestContainersKernelFloodIsCapped(t *testing.T) {
	fc := floodCase{mode: "frame-without-end"}
	t.Run("docker", func(t *testing.T) { checkFlood(t, inContainer(kernelImage), "kernel", fc) })
	t.Run("containerd", func(t *testing.T) { checkFlood(t, inContainerd(t, kernelImage), "kernel", fc) })
}

func TestContainersLSPFloodIsCapped(t *testing.T) {
	for _, fc := range floodCases {
		t.Run("docker/"+fc.mode, func(t *testing.T) { checkFlood(t, inContainer(lspImage), "lsp", fc) })
		t.Run("containerd/"+fc.mode, func(t *testing.T) { checkFlood(t, inContainerd(t, lspImage), "lsp", fc) })
	}
}

func TestContainersDAPFloodIsCapped(t *testing.T) {
	for _, fc := range floodCases {
		t.Run("docker/"+fc.mode, func(t *testing.T) { checkFlood(t, inContainer(debugImage), "dap", fc) })
		t.Run("containerd/"+fc.mode, func(t *testing.T) { checkFlood(t, inContainerd(t, debugImage), "dap", fc) })
	}
}
