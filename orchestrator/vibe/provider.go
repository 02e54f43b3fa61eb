package vibe

import (
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

// Provider offers the five vibe_* tools while a run's vibe feature is on;
// the registry hides them otherwise, and run/update toggles the feature.
// Workers a run spawned keep running if vibe is switched off and are
// killed when the run ends.
type Provider struct {
	cfg     Config
	metrics *metrics.Metrics
}

var _ orchestrator.Provider = (*Provider)(nil)

// New checks the configuration and builds the provider. Runners may be
// empty: spawning a worker of a tier without one is then an error that
// names the key to set.
func New(cfg Config, m *metrics.Metrics) (*Provider, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	return &Provider{cfg: cfg, metrics: m}, nil
}

// Feature is orchestrator.FeatureVibe.
func (p *Provider) Feature() string { return orchestrator.FeatureVibe }

// Tools returns vibe_spawn, vibe_send, vibe_wait, vibe_kill and vibe_list.
func (p *Provider) Tools(*orchestrator.Run) []orchestrator.Tool {
	return []orchestrator.Tool{spawnTool{p}, sendTool{p}, waitTool{p}, killTool{p}, listTool{p}}
}

func (p *Provider) pool(run *orchestrator.Run) *pool { return poolOf(run, p.cfg, p.metrics) }
