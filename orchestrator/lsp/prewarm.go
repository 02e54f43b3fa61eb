package lsp

import (
	"context"
	"path/filepath"
	"sync"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// prewarmKey marks the context of the starts run/start asks for, so that
// status can say a server was prewarmed.
type prewarmKey struct{}

// prewarming says whether ctx is a prewarm's.
func prewarming(ctx context.Context) bool { return ctx.Value(prewarmKey{}) != nil }

// prewarm starts, in the background, the servers a call would start for
// the roots found in the run's workdir (prewarmPicks), each once one of
// the places is free: a place is held until the server has loaded its
// project (or lsp.load_timeout passed), so that a burst of run/starts
// does not load every project on the machine at once. The run's end
// cancels what has not started, and a start under way ends with the run
// as any start does. A call that comes meanwhile shares the start, and
// waits for the load, as it would for a start of its own. A server
// adopted from the pool reopens what the run that parked it had open
// (reopenAdopted); then each is asked a first query (warmUpPrewarmed,
// lsp.warm_up), holding its place meanwhile.
func (sv *supervisor) prewarm(places chan struct{}) {
	sv.mu.Lock()
	if sv.closed {
		sv.mu.Unlock()
		return
	}
	sv.wg.Add(1)
	sv.mu.Unlock()
	go func() {
		defer sv.wg.Done()
		ctx := context.WithValue(sv.run.Context(), prewarmKey{}, true)
		var wg sync.WaitGroup
		for _, m := range prewarmPicks(ctx, sv.run, sv.conf) {
			wg.Go(func() {
				select {
				case places <- struct{}{}:
				case <-ctx.Done():
					return
				}
				defer func() { <-places }()
				if s, err := sv.get(ctx, m); err == nil {
					loaded := s.waitLoaded(ctx, "")
					sv.reopenAdopted(ctx, m, s)
					if loaded {
						sv.warmUpPrewarmed(ctx, m, s)
					}
				}
			})
		}
		wg.Wait()
	}()
}

// prewarmPicks is what run/start starts: for each directory of the
// workdir that holds a root marker (the shallowest first), the servers a
// call about a file there would get, by the rule detect applies to a
// file (for each language, the first catalog entry whose marker is there
// and whose executable resolves), keeping those whose entry prewarms, up
// to lsp.prewarm_max in all. Nothing is picked once the enclosure says it
// cannot serve.
func prewarmPicks(ctx context.Context, run *orchestrator.Run, conf Config) []match {
	var markers []string
	for _, sc := range conf.Servers {
		markers = append(markers, sc.RootMarkers...)
	}
	dirs := workspace.MarkerDirs(run.Workdir, markers, maxMarkerDirs)
	roots := workspace.Roots(dirs)
	type found struct {
		exe string
		ok  bool
	}
	exes := map[string]found{}
	var picks []match
	for _, rel := range roots {
		taken := map[string]bool{} // the extensions an entry already serves at this root
		for _, sc := range conf.Servers {
			if !markedAt(sc, dirs, rel) || servesAny(sc, taken) {
				continue
			}
			f, looked := exes[sc.Name]
			if !looked {
				exe, err := run.Enclosure.LookPath(ctx, sc.Command[0])
				if err != nil && (ctx.Err() != nil || enclosure.Down(err)) {
					return picks
				}
				f = found{exe, err == nil}
				exes[sc.Name] = f
			}
			if !f.ok {
				continue
			}
			for e := range sc.Extensions {
				taken[e] = true
			}
			if sc.prewarms() {
				picks = append(picks, match{cfg: sc, root: filepath.Join(run.Workdir, rel), exe: f.exe})
				if len(picks) == conf.PrewarmMax {
					return picks
				}
			}
		}
	}
	return picks
}

// markedAt says whether one of the entry's root markers is in the
// directory rel (workspace.MarkerDirs' answer).
func markedAt(sc ServerConfig, dirs map[string][]string, rel string) bool {
	for _, mk := range sc.RootMarkers {
		for _, d := range dirs[mk] {
			if d == rel {
				return true
			}
		}
	}
	return false
}

// servesAny says whether the entry serves one of the extensions.
func servesAny(sc ServerConfig, exts map[string]bool) bool {
	for e := range sc.Extensions {
		if exts[e] {
			return true
		}
	}
	return false
}
