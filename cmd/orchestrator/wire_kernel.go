package main

import (
	"github.com/berth-dev/berth/orchestrator/kernel"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

// eval reads the "kernels" section: interpreters, the cell idle budget,
// the kernel idle timeout and the output caps.
func init() {
	cfg := kernel.DefaultConfig()
	register(component{section: "kernels", config: &cfg, build: func(d *deps) error {
		p := kernel.New(cfg, d.Metrics)
		d.Registry.Add(p)
		d.Resumers[metrics.KindKernel] = p
		return nil
	}})
}
