package main

import "github.com/berth-dev/berth/orchestrator/vibe"

// vibe_* reads the "vibe" section: runners per tier, limits, wait bounds.
func init() {
	cfg := vibe.DefaultConfig()
	register(component{section: "vibe", config: &cfg, build: func(d *deps) error {
		p, err := vibe.New(cfg, d.Metrics)
		if err != nil {
			return err
		}
		d.Registry.Add(p)
		return nil
	}})
}
