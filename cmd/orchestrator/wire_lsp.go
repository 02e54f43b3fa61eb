package main

import "github.com/berth-dev/berth/orchestrator/lsp"

// lsp: the language-server tools and diagnostics on write.
func init() {
	cfg := lsp.DefaultConfig()
	register(component{section: "lsp", config: &cfg, build: func(d *deps) error {
		p, err := lsp.New(cfg, d.Metrics)
		if err != nil {
			return err
		}
		d.Registry.Add(p)
		d.Registry.SetWriteObserver(p)
		return nil
	}})
}
