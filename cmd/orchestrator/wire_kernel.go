package main

import "github.com/berth-dev/berth/orchestrator/kernel"

// eval reads the "kernels" section: interpreters, the cell idle budget,
// the kernel idle timeout and the output caps.
func init() {
	cfg := kernel.DefaultConfig()
	register(component{section: "kernels", config: &cfg, build: func(d *deps) error {
		d.Registry.Add(kernel.New(cfg, d.Metrics))
		return nil
	}})
}
