package vibe

import (
	"fmt"
	"time"
)

// Config is the "vibe" section of the configuration file.
type Config struct {
	// Runners holds the worker command of each tier. The vibe_* tools are
	// read-tier, so a plan or readonly agent may start workers: the
	// worker's own tools must keep to the surface it is told.
	Runners Runners `yaml:"runners"`
	// MaxWorkers bounds the workers of one run that are not killed
	// (running or settled and keeping their result); vibe_kill frees a slot.
	MaxWorkers int `yaml:"max_workers"`
	// OutputLimit caps the stdout kept as a worker's result, in bytes;
	// the rest is dropped and the result says how much.
	OutputLimit int `yaml:"output_limit"`
	// StderrLimit caps the stderr kept to explain a failure, in bytes;
	// the last bytes are kept, since that is where the error usually is.
	StderrLimit int `yaml:"stderr_limit"`
	// WaitDefault is vibe_wait's timeout when the model names none.
	WaitDefault time.Duration `yaml:"wait_default"`
	// WaitMax is the longest timeout_seconds vibe_wait accepts.
	WaitMax time.Duration `yaml:"wait_max"`
}

// Runners are argv lists, one per tier. Empty means the tier has no
// runner, and spawning a worker of that tier is an error naming the key.
type Runners struct {
	// Fast is the worker command of the fast tier, an argv list (no
	// shell), run in the working directory with the assignment on stdin;
	// "{surface}" in any element is replaced with the surface the worker
	// was started from (full, plan or readonly), which its environment
	// also holds as BERTH_SURFACE. Empty: spawning a fast worker is an
	// error naming this key.
	Fast []string `yaml:"fast"`
	// Good is the worker command of the good tier, as fast.
	Good []string `yaml:"good"`
}

// DefaultConfig has no runners (Berth cannot guess the agent command) and
// modest limits.
func DefaultConfig() Config {
	return Config{
		MaxWorkers:  8,
		OutputLimit: 64 << 10,
		StderrLimit: 8 << 10,
		WaitDefault: time.Minute,
		WaitMax:     10 * time.Minute,
	}
}

// check reports the first invalid setting, naming its key.
func (c Config) check() error {
	switch {
	case c.MaxWorkers < 1:
		return fmt.Errorf("vibe.max_workers must be at least 1, got %d", c.MaxWorkers)
	case c.OutputLimit < 1:
		return fmt.Errorf("vibe.output_limit must be a positive number of bytes, got %d", c.OutputLimit)
	case c.StderrLimit < 1:
		return fmt.Errorf("vibe.stderr_limit must be a positive number of bytes, got %d", c.StderrLimit)
	case c.WaitMax < time.Second:
		return fmt.Errorf("vibe.wait_max must be at least 1s, got %s", c.WaitMax)
	case c.WaitDefault < time.Second || c.WaitDefault > c.WaitMax:
		return fmt.Errorf("vibe.wait_default must be between 1s and vibe.wait_max (%s), got %s", c.WaitMax, c.WaitDefault)
	}
	for tier, argv := range map[string][]string{tierFast: c.Runners.Fast, tierGood: c.Runners.Good} {
		if len(argv) > 0 && argv[0] == "" {
			return fmt.Errorf("vibe.runners.%s: the first element must be the executable, got an empty string", tier)
		}
	}
	return nil
}

// Tiers of worker.
const (
	tierFast = "fast"
	tierGood = "good"
)

// runner returns the argv of a tier, or an error naming the key to set.
func (c Config) runner(tier string) ([]string, error) {
	argv := c.Runners.Fast
	if tier == tierGood {
		argv = c.Runners.Good
	}
	if len(argv) == 0 {
		return nil, fmt.Errorf("no runner is configured for tier %q: set vibe.runners.%s in Berth's configuration to the worker command as an argv list (for example [\"my-agent\", \"--print\"]), or use the other tier", tier, tier)
	}
	return argv, nil
}
