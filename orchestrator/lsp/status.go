package lsp

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/internal/text"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// status lists the running servers and, for each catalog entry, whether
// its root marker and executable were found. With a file it also says
// which entry serves that file, or which half is missing.
func (p *Provider) status(ctx context.Context, run *orchestrator.Run, a args) *orchestrator.Result {
	var b strings.Builder
	slots := p.state(run).sv.snapshot()
	fmt.Fprintf(&b, "Language servers of this run (%d):\n", len(slots))
	if len(slots) == 0 {
		b.WriteString("  none started yet (a server starts on the first call about one of its files, or at run/start for the roots found in the workdir)\n")
	}
	p.state(run).sv.mu.Lock()
	for _, sl := range slots {
		root := workspace.Rel(run.Workdir, sl.key.root)
		why := "at the first call about one of its files"
		if sl.prewarm {
			why = "at run/start (prewarm)"
		}
		switch {
		case !done(sl.ready):
			fmt.Fprintf(&b, "  %s for root %s: starting %s\n", sl.key.name, root, why)
		case sl.srv != nil && sl.srv.proc.alive() && !sl.srv.proc.isClosing():
			s := sl.srv
			state := "ready"
			if !s.load.isLoaded() {
				state = "loading"
			}
			how := "started cold " + why
			if sl.how == metrics.LSPAdopted {
				how = fmt.Sprintf("adopted %s: parked %s by an earlier run", why, sl.parkedFor.Round(time.Millisecond))
				if s.takenBack {
					how += " (kept across a restart of Berth)"
				}
				if len(sl.reopened) > 0 {
					how += fmt.Sprintf(", %d document(s) the earlier run had open reopened", len(sl.reopened))
				}
			}
			if sl.warmed != "" {
				how += ", " + sl.warmed
			}
			fmt.Fprintf(&b, "  %s for root %s: %s, %s, %s, up %s, positions in %s\n", sl.key.name, root, state, how,
				enclosure.Describe(s.proc.handle), time.Since(s.proc.started).Round(time.Second), s.enc)
		default:
			fmt.Fprintf(&b, "  %s for root %s: down (%s); %d failure(s) in a row\n", sl.key.name, root, sl.lastErr, sl.crashes)
		}
		if sl.srv != nil {
			if tail := text.Message(sl.srv.proc.stderr.tail(5)); tail != "" {
				fmt.Fprintf(&b, "    stderr (last lines):\n      %s\n", strings.ReplaceAll(tail, "\n", "\n      "))
			}
		}
	}
	p.state(run).sv.mu.Unlock()
	if p.pool.on() {
		parked := p.pool.list(run.Enclosure.Driver(), run.Enclosure.ID())
		fmt.Fprintf(&b, "Parked on this enclosure (%d), each adopted by the next run on its workdir and root, else ended %s after its run:\n", len(parked), p.conf.KeepWarm)
		for _, ps := range parked {
			mem := ""
			if ps.rss > 0 {
				mem = fmt.Sprintf(", %d MiB", ps.rss>>20)
			}
			fmt.Fprintf(&b, "  %s for %s: %s, parked %s ago, ends in %s%s\n", ps.name, text.Path(ps.root), ps.process,
				ps.parked.Round(time.Second), ps.left.Round(time.Second), mem)
		}
	}

	b.WriteString("Catalog (a server starts only when both its root marker and its executable are found):\n")
	var all []string
	for _, sc := range p.conf.Servers {
		all = append(all, sc.RootMarkers...)
	}
	dirs := workspace.MarkerDirs(run.Workdir, all, maxMarkerDirs)
	for _, sc := range p.conf.Servers {
		var exe string
		if path, err := run.Enclosure.LookPath(ctx, sc.Command[0]); err == nil {
			exe = "executable " + path
		} else if enclosure.Down(err) {
			exe = "executable unknown: " + enclosure.Say(err) // the container, not the server
		} else {
			exe = fmt.Sprintf("executable %q MISSING in the %s enclosure", sc.Command[0], run.Enclosure.Driver())
		}
		roots := rootsOf(sc, dirs)
		marker := fmt.Sprintf("root marker (%s) MISSING in the workdir", strings.Join(sc.RootMarkers, ", "))
		if len(roots) > 0 {
			if len(roots) > 5 {
				roots = append(roots[:5], fmt.Sprintf("and %d more", len(roots)-5))
			}
			marker = "roots at " + strings.Join(roots, ", ")
		}
		fmt.Fprintf(&b, "  %s (%s): %s; %s\n", sc.Name, strings.Join(sc.Languages, ", "), marker, exe)
	}
	if a.File != "" {
		abs, bad := resolveFile(run, a.File)
		if bad != nil {
			return bad
		}
		m, bad := detect(ctx, run, p.conf, abs, nil)
		if bad != nil {
			b.WriteString(bad.FirstText())
		} else {
			fmt.Fprintf(&b, "%s is served by %s with root %s", workspace.Rel(run.Workdir, abs), m.cfg.Name, workspace.Rel(run.Workdir, m.root))
		}
	}
	return orchestrator.Text(strings.TrimRight(b.String(), "\n"))
}

// reload restarts the server of the file's root, or every server.
func (p *Provider) reload(ctx context.Context, run *orchestrator.Run, a args) *orchestrator.Result {
	sv := p.state(run).sv
	var keep func(slotKey) bool
	if a.File != "" {
		abs, bad := resolveFile(run, a.File)
		if bad != nil {
			return bad
		}
		m, bad := detect(ctx, run, p.conf, abs, nil)
		if bad != nil {
			return bad
		}
		key := slotKey{m.root, m.cfg.Name}
		if !sv.has(key) { // never started: start it, once
			start := time.Now()
			if _, err := sv.get(ctx, m); err != nil {
				return orchestrator.Errorf("%v", err)
			}
			return orchestrator.Textf("started %s (root %s) in %s: it was not running", m.cfg.Name, workspace.Rel(run.Workdir, m.root), time.Since(start).Round(time.Millisecond))
		}
		keep = func(k slotKey) bool { return k == key }
	}
	start := time.Now()
	picked, err := sv.reload(ctx, keep)
	if len(picked) == 0 {
		return orchestrator.Text("no language server is running for this run, so there was nothing to reload")
	}
	var names []string
	for _, sl := range picked {
		names = append(names, fmt.Sprintf("%s (root %s)", sl.key.name, workspace.Rel(run.Workdir, sl.key.root)))
	}
	if err != nil {
		return orchestrator.Errorf("restarting %s: %v", strings.Join(names, ", "), err)
	}
	return orchestrator.Textf("restarted %s in %s", strings.Join(names, ", "), time.Since(start).Round(time.Millisecond))
}
