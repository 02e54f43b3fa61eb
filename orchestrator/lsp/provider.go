package lsp

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
	"github.com/berth-dev/berth/orchestrator/workspace"
)

// Provider offers lsp and lsp_rename to runs with the lsp feature, and
// hears the harness's writes as the registry's WriteObserver. It starts a
// run's servers at run/start (RunStarted) and keeps the servers of ended
// runs parked for the next run on the same root until Shutdown.
type Provider struct {
	conf    Config
	metrics *metrics.Metrics
	pool    *pool
	// warming holds a place for each prewarmed server starting now
	// (lsp.prewarm_concurrency), across runs.
	warming chan struct{}
	// Writer applies renames; its Rename hook lets tests inject a failure.
	Writer *workspace.Writer
}

var (
	_ orchestrator.Provider      = (*Provider)(nil)
	_ orchestrator.WriteObserver = (*Provider)(nil)
	_ orchestrator.RunStarter    = (*Provider)(nil)
	_ orchestrator.Shutdowner    = (*Provider)(nil)
)

// New builds the provider; a configuration that cannot work is an error.
func New(conf Config, m *metrics.Metrics) (*Provider, error) {
	if err := conf.validate(); err != nil {
		return nil, err
	}
	for _, s := range conf.Servers {
		m.KnowLSPServer(s.Name)
	}
	return &Provider{conf: conf, metrics: m, pool: newPool(conf, m), warming: make(chan struct{}, max(conf.PrewarmConcurrency, 1)),
		Writer: &workspace.Writer{}}, nil
}

// RunStarted starts, in the background, the servers for the roots found
// in the run's workdir (prewarm), adopting parked ones where it can; the
// registry calls it only when the run's lsp feature is on.
func (p *Provider) RunStarted(run *orchestrator.Run) {
	if run.Workdir == "" || p.conf.PrewarmMax == 0 {
		return
	}
	p.state(run).sv.prewarm(p.warming)
}

// Shutdown ends every parked server; Berth calls it when it stops, once
// its runs have ended (and parked nothing, ending with Berth).
func (p *Provider) Shutdown() { p.pool.shutdown() }

// Feature is orchestrator.FeatureLSP.
func (p *Provider) Feature() string { return orchestrator.FeatureLSP }

// Tools returns lsp and lsp_rename for a run with a working directory.
func (p *Provider) Tools(run *orchestrator.Run) []orchestrator.Tool {
	if run.Workdir == "" {
		return nil
	}
	return []orchestrator.Tool{lspTool{p}, renameTool{p}}
}

// runState is the provider's per-run state: the servers and the registry
// of diagnostics already reported.
type runState struct {
	sv  *supervisor
	reg *registry
	// restartNoted: the run was resumed after Berth restarted, and its
	// first write report said that reg starts empty (restartedReport).
	restartNoted atomic.Bool
}

// Close ends the run's servers; run.Value calls it when the run ends.
func (st *runState) Close() { st.sv.Close() }

type stateKey struct{}

// state is the run's runState, made on first use.
func (p *Provider) state(run *orchestrator.Run) *runState {
	return run.Value(stateKey{}, func() any {
		return &runState{sv: newSupervisor(run, p.conf, p.metrics, p.pool), reg: newRegistry()}
	}).(*runState)
}

// resolveFile resolves a path the model gave to a regular file inside the
// workdir.
func resolveFile(run *orchestrator.Run, file string) (string, *orchestrator.Result) {
	root, err := run.Root()
	if err != nil {
		return "", orchestrator.Errorf("the run's working directory is unusable: %v", err)
	}
	abs, st, err := root.ResolveStat(file) // the walk's own look: no second stat
	switch {
	case err != nil:
		return "", orchestrator.Errorf("file: %v", err)
	case st == nil:
		return "", orchestrator.Errorf("file %q does not exist in the workdir: pass a path relative to %s", file, root.Where())
	case st.IsDir():
		return "", orchestrator.Errorf("file %q is a directory: pass a source file", file)
	}
	return abs, nil
}

// fileServer resolves a file the model named and finds and starts its
// server.
func (p *Provider) fileServer(ctx context.Context, run *orchestrator.Run, file string) (string, *server, *orchestrator.Result) {
	abs, bad := resolveFile(run, file)
	if bad != nil {
		return "", nil, bad
	}
	s, bad := p.serverFor(ctx, run, abs)
	return abs, s, bad
}

// serverFor finds and starts the server for a file.
func (p *Provider) serverFor(ctx context.Context, run *orchestrator.Run, abs string) (*server, *orchestrator.Result) {
	sv := p.state(run).sv
	m, bad := detect(ctx, run, p.conf, abs, sv.running)
	if bad != nil {
		return nil, bad
	}
	s, err := sv.get(ctx, m)
	if err != nil {
		return nil, orchestrator.Errorf("%v", err)
	}
	return s, nil
}

func schema(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("lsp: schema: %v", err))
	}
	return b
}
