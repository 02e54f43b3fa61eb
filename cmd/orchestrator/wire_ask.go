package main

import "github.com/berth-dev/berth/orchestrator/ask"

// ask_user reads the "questions" section: questions.timeout.
func init() {
	cfg := ask.DefaultConfig()
	register(component{section: "questions", config: &cfg, build: func(d *deps) error {
		p, err := ask.New(cfg, d.Metrics)
		if err != nil {
			return err
		}
		d.Registry.Add(p)
		return nil
	}})
}
