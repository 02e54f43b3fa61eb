package main

import (
	"log/slog"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/state"
)

// keeping opens the state directory serve keeps its processes' records
// in, as runs.Keeping: state.dir (or --state-dir) when set, whose
// failure stops Berth with what to fix; else a directory of this Berth's
// own, whose failure (a read-only root) is logged once and leaves Berth
// running without keeping anything. It returns the records a Berth
// before this one left there; each file that is no record is logged,
// with why, and left alone. Nothing is kept with
// enclosure.reattach_grace 0.
func keeping(cfg *config, runs *orchestrator.Runs, log *slog.Logger) ([]state.Record, error) {
	if cfg.Enclosure.ReattachGrace <= 0 {
		return nil, nil
	}
	var (
		s   *state.Store
		err error
	)
	if cfg.State.Dir != "" {
		if s, err = state.Open(cfg.State.Dir); err != nil {
			return nil, err
		}
	} else if s, err = state.Default(state.DefaultBase()); err != nil {
		log.Warn("no state directory: processes end with Berth, as none could be found after a restart (set state.dir or --state-dir to a writable directory)", "err", err)
		return nil, nil
	}
	log.Info("state directory", "dir", s.Dir(), "own", s.Own(), "reattach_grace", cfg.Enclosure.ReattachGrace)
	runs.Keeping = &orchestrator.Keeping{Store: s, Grace: cfg.Enclosure.ReattachGrace, Log: log}
	records, bad := s.Records()
	for _, err := range bad {
		log.Warn(err.Error())
	}
	return records, nil
}
