package main

import (
	"log/slog"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

// component is one tool family wired into the binary: its section of the
// configuration file and how it adds itself to the registry. Each tool
// package has one file here (wire_<package>.go) whose init calls register,
// so adding a family touches no shared file.
type component struct {
	// section is the YAML key of the component's configuration.
	section string
	// config points at the component's configuration struct, holding its
	// built-in defaults; the loader decodes the file's section into it.
	config any
	// build adds the component's providers (and observers) to the registry,
	// after the configuration is loaded. An error stops the server with a
	// clear message (a configured grammar library that is missing, say).
	build func(d *deps) error
}

// deps is what build gets.
type deps struct {
	Registry *orchestrator.Registry
	Metrics  *metrics.Metrics
	Log      *slog.Logger
	// Resumers: a family that can take its processes back after a
	// restart of Berth adds its Resumer for their kind.
	Resumers map[string]orchestrator.Resumer
	// Takers: a family whose processes a Berth takes back for no run
	// (language servers, parked) adds its Taker for their kind.
	Takers map[string]orchestrator.Taker
}

var components []component

func register(c component) { components = append(components, c) }
