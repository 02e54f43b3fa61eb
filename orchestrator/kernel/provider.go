package kernel

import (
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

// Provider offers eval on runs with the kernels feature.
type Provider struct {
	tool *evalTool
}

var _ orchestrator.Provider = (*Provider)(nil)

// New builds the provider. Zero fields of cfg take their defaults.
func New(cfg Config, m *metrics.Metrics) *Provider {
	return &Provider{tool: &evalTool{cfg: cfg.withDefaults(), m: m}}
}

// Feature is orchestrator.FeatureKernels.
func (p *Provider) Feature() string { return orchestrator.FeatureKernels }

// Tools returns eval.
func (p *Provider) Tools(*orchestrator.Run) []orchestrator.Tool {
	return []orchestrator.Tool{p.tool}
}
