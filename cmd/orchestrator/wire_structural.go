package main

import "github.com/berth-dev/berth/orchestrator/structural"

// ast_grep, ast_edit and resolve read the "structural" section: grammar
// libraries loaded at start, result and file-size limits, workers.
func init() {
	cfg := structural.DefaultConfig()
	register(component{section: "structural", config: &cfg, build: func(d *deps) error {
		p, err := structural.New(cfg)
		if err != nil {
			return err
		}
		for name, why := range p.Unavailable() {
			d.Log.Warn("structural: optional grammar unavailable", "language", name, "reason", why)
		}
		p.Observers = d.Registry // resolve reports the problems its writes introduce
		d.Registry.Add(p)
		return nil
	}})
}
