package main

import (
	"github.com/berth-dev/berth/orchestrator/lsp"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

// lsp: the language-server tools and diagnostics on write; the servers a
// Berth before this one left to their relays are parked again (Takers).
func init() {
	cfg := lsp.DefaultConfig()
	register(component{section: "lsp", config: &cfg, build: func(d *deps) error {
		p, err := lsp.New(cfg, d.Metrics)
		if err != nil {
			return err
		}
		d.Registry.Add(p)
		d.Registry.SetWriteObserver(p)
		d.Takers[metrics.KindLSP] = p
		return nil
	}})
}
