package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/procfs"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// A language server outlives its run, parked for the next run on its
// enclosure and root (issue 28 item 2): after run/stop, exactly the
// servers Berth reports parked may be left. These helpers ask Berth which
// (lsp status of a run in an empty directory of the site) and tell them
// apart from anything else left.

// asker holds the clients that started a site's runs: each is a Berth
// that may have parked servers there. A site made without one (nil) asks
// nothing: nothing may be left.
type asker struct {
	mu sync.Mutex
	cs []*rpc.Client
}

func (a *asker) set(c *rpc.Client) {
	if a == nil {
		return
	}
	a.mu.Lock()
	if !slices.Contains(a.cs, c) {
		a.cs = append(a.cs, c)
	}
	a.mu.Unlock()
}

func (a *asker) clients() []*rpc.Client {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.cs)
}

// parkedLine is a parked server's line in lsp status: its process is
// "pid N" or "relay tag T".
var parkedLine = regexp.MustCompile(`(?m)^  \S+ for .*?: (pid \d+|relay tag \S+), parked `)

// parked is what every Berth that started a run of the site reports
// parked on the site's enclosure: each server's process as status names
// it ("pid N", "relay tag T"). A Berth that has stopped (its client is
// closed) has ended its parked servers and reports none.
func (s *site) parked(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, c := range s.asker.clients() {
		out = append(out, s.parkedBy(t, c)...)
	}
	return out
}

// parkedBy is what the Berth of c reports parked on the site's
// enclosure.
func (s *site) parkedBy(t *testing.T, c *rpc.Client) []string {
	t.Helper()
	dir, err := os.MkdirTemp(s.Dir, ".berth-probe-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	probe := *s
	probe.Dir = dir
	r, err := c.StartRun(testCtx(t), probe.params(nil))
	if err != nil {
		return nil
	}
	defer func() { _ = c.StopRun(testCtx(t), r.RunID) }()
	res, err := c.CallTool(testCtx(t), r.RunID, "full", "lsp", mustJSON(t, map[string]any{"action": "status"}))
	if err != nil || res.IsError {
		t.Fatalf("lsp status of a probe run: %v %v", err, res)
	}
	_, list, ok := strings.Cut(text(res), "Parked on this enclosure")
	if !ok {
		return nil
	}
	list, _, _ = strings.Cut(list, "\nCatalog")
	var out []string
	for _, m := range parkedLine.FindAllStringSubmatch(list, -1) {
		out = append(out, m[1])
	}
	return out
}

// ownLine is one of a run's language servers in its lsp status.
var ownLine = regexp.MustCompile(`(?m)^  \S+ for root .*?: \w+, .*?, (pid \d+|relay tag \S+), up `)

// serversOf is what the live run reports as its own language servers,
// each named as status names it.
func serversOf(t *testing.T, c *rpc.Client, run string) []string {
	t.Helper()
	st := text(callTool(t, c, run, "lsp", map[string]any{"action": "status"}))
	own, _, _ := strings.Cut(st, "Parked on this enclosure")
	var out []string
	for _, m := range ownLine.FindAllStringSubmatch(own, -1) {
		out = append(out, m[1])
	}
	return out
}

// waitOnlyLanguageServers is waitNoProcesses while run goes on: its own
// language servers (prewarmed at run/start) may be left too.
func (s *site) waitOnlyLanguageServers(t *testing.T, after string, c *rpc.Client, run string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		allowed := append(serversOf(t, c, run), s.parked(t)...)
		stray := s.notParked(t, allowed)
		if len(stray) == 0 {
			t.Logf("after %s only language servers are left, the run's and parked ones: %v", after, allowed)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left in %s after %s: %v (the run's and parked language servers: %v)", s.place, after, stray, allowed)
		}
	}
}

// unparked is processes less the parked language servers Berth reports
// (with their relays and what they started).
func (s *site) unparked(t *testing.T) []string {
	t.Helper()
	parked := s.parked(t)
	if len(parked) == 0 {
		return s.processes(t)
	}
	return s.notParked(t, parked)
}

// proc is one process of a site: its pid, its parent's and its command
// line, with the host's pids.
type proc struct {
	pid, ppid int
	args      string
}

// table is the site's processes (processes) with their parents.
func (s *site) table(t *testing.T) []proc {
	t.Helper()
	var out []proc
	if s.Container == "" {
		for _, p := range procfs.In(s.Dir) {
			out = append(out, proc{p.PID, p.PPID, p.Cmdline()})
		}
		return out
	}
	for _, l := range s.processes(t) {
		f := strings.SplitN(l, " ", 3)
		if len(f) < 3 {
			continue
		}
		pid, _ := strconv.Atoi(f[0])
		ppid, _ := strconv.Atoi(f[1])
		out = append(out, proc{pid, ppid, f[2]})
	}
	return out
}

// notParked lists the site's processes ("PID ARGS") that belong to none
// of the servers (each named as status names it: the server's pid on the
// host, its relay's pid or tag in a container), with the relay each runs
// under and what each started; a server with no process is listed too.
func (s *site) notParked(t *testing.T, parked []string) []string {
	t.Helper()
	procs := s.table(t)
	ours := map[int]bool{}
	if s.Container == "" {
		// On the host a server is named by its own pid, and may work
		// outside the workdir: it is looked up whole, with its relay.
		for _, id := range parked {
			pid, _ := strconv.Atoi(strings.TrimPrefix(id, "pid "))
			srv, ok := procfs.Read(pid)
			if !ok || !srv.Live() {
				return []string{"no process for the parked server " + id}
			}
			ours[pid], ours[srv.PPID] = true, true
			for _, d := range procfs.Descendants(pid) {
				ours[d] = true
			}
		}
		parked = nil
	}
	for _, id := range parked {
		found := false
		for _, p := range procs {
			tag, isTag := strings.CutPrefix(id, "relay tag ")
			if id == "pid "+strconv.Itoa(p.pid) || (isTag && strings.Contains(p.args, "--tag "+tag)) {
				ours[p.pid], found = true, true
			}
		}
		if !found {
			return []string{"no process for the parked server " + id}
		}
	}
	for grew := true; grew; { // and what they started
		grew = false
		for _, p := range procs {
			if !ours[p.pid] && ours[p.ppid] {
				ours[p.pid], grew = true, true
			}
		}
	}
	var stray []string
	for _, p := range procs {
		if !ours[p.pid] {
			stray = append(stray, strconv.Itoa(p.pid)+" "+p.args)
		}
	}
	return stray
}

// named are the pids of the site's processes whose program is name (not
// a relay that runs it).
func (s *site) named(t *testing.T, name string) []int {
	t.Helper()
	var out []int
	for _, p := range s.table(t) {
		if f := strings.Fields(p.args); len(f) > 0 && filepath.Base(f[0]) == name {
			out = append(out, p.pid)
		}
	}
	slices.Sort(out)
	return out
}
