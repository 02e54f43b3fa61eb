package ask

import "time"

// Config is the "questions" section of the configuration file.
type Config struct {
	// Timeout is how long a card waits for a human before ask_user fails
	// with an instruction to proceed on a stated assumption (the card is
	// cancelled at the harness).
	Timeout time.Duration `yaml:"timeout"`
}

// DefaultConfig waits ten minutes for an answer.
func DefaultConfig() Config { return Config{Timeout: 10 * time.Minute} }
