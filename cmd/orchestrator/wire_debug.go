package main

import (
	"github.com/berth-dev/berth/orchestrator/debug"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

// debug reads the "debug" section: the adapter catalog, the session's
// time to live and the stop waits. Sessions end with the runs that own
// them, so shutdown needs no hook of its own; a launched session kept
// across a restart of Berth is given back to its conversation's run
// (Resumers).
func init() {
	cfg := debug.DefaultConfig()
	register(component{section: "debug", config: &cfg, build: func(d *deps) error {
		p, err := debug.New(cfg, d.Metrics)
		if err != nil {
			return err
		}
		d.Registry.Add(p)
		d.Resumers[metrics.KindDebug] = p
		return nil
	}})
}
