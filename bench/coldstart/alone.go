package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/berth-dev/berth/bench/internal/lspdirect"
	"github.com/berth-dev/berth/bench/internal/stats"
)

// aloneRounds is the least number of rounds the server alone is timed:
// one sample per round after the idle, so fewer are noise.
const aloneRounds = 5

// aloneResult is the server alone's warm references, with no Berth:
// the median of one call per round made -think after the last, and the
// median of the rounds' medians of -warm calls back to back.
type aloneResult struct {
	idle, warm time.Duration
	rounds     int
	// first: its first references about the file, opened for it, -think
	// after a first references about another file (p.others[0]) had
	// loaded and warmed it: what a prewarmed run's first call asks of
	// it.
	first time.Duration
}

// alone times p's references straight against p's server on the host,
// as lspdirect asks it (the catalog entry's initialization options, no
// Berth): the server loaded and warm, each round -think idle, then one
// call, then -warm back to back. It says what a warm call after an
// agent's thinking time costs the server itself, against one that
// follows another at once: the comparator a run's first call is judged
// against.
func (b *bench) alone(p *project, rounds int) (aloneResult, error) {
	rounds = max(rounds, aloneRounds)
	line, col, err := spot(p.dir, query{p.refsFile, p.refsFind, p.refsSymbol})
	if err != nil {
		return aloneResult{}, err
	}
	o := p.others[0]
	oline, ocol, err := spot(p.dir, o)
	if err != nil {
		return aloneResult{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := lspdirect.StartServer(ctx, p.server, p.dir, p.dir)
	if err != nil {
		return aloneResult{}, fmt.Errorf("the server alone: %w", err)
	}
	defer c.Close()
	path := filepath.Join(p.dir, p.refsFile)
	ask := func() (time.Duration, error) { return c.Request(ctx, "references", path, line-1, col) }
	// The load and a warm-up about another file, untimed, as prewarm
	// has it; then the first references about the file.
	if _, err := c.Request(ctx, "references", filepath.Join(p.dir, o.file), oline-1, ocol); err != nil {
		return aloneResult{}, fmt.Errorf("the server alone: %w", err)
	}
	time.Sleep(b.think)
	first, err := ask()
	if err != nil {
		return aloneResult{}, fmt.Errorf("the server alone: %w", err)
	}
	var idle, warm []time.Duration
	for range rounds {
		time.Sleep(b.think)
		d, err := ask()
		if err != nil {
			return aloneResult{}, err
		}
		idle = append(idle, d)
		var w []time.Duration
		for range b.warm {
			d, err := ask()
			if err != nil {
				return aloneResult{}, err
			}
			w = append(w, d)
		}
		warm = append(warm, stats.Median(w))
	}
	return aloneResult{idle: stats.Median(idle), warm: stats.Median(warm), rounds: rounds, first: first}, nil
}

// spot is where q asks, in dir: its 1-based line and its 0-based column
// (the queries' lines are ASCII: bytes are UTF-16 units).
func spot(dir string, q query) (line, col int, err error) {
	if line, err = position(dir, q.file, q.find); err != nil {
		return 0, 0, err
	}
	raw, err := os.ReadFile(filepath.Join(dir, q.file))
	if err != nil {
		return 0, 0, err
	}
	if col = strings.Index(strings.Split(string(raw), "\n")[line-1], q.symbol); col < 0 {
		return 0, 0, fmt.Errorf("%s:%d does not hold %q", q.file, line, q.symbol)
	}
	return line, col, nil
}
