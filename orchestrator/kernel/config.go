package kernel

import "time"

// Config is the "kernels" section of the configuration file.
type Config struct {
	// Python is the interpreter used when the working directory has no
	// .venv/bin/python or venv/bin/python. A bare name is looked up on the
	// enclosure's PATH.
	Python string `yaml:"python"`
	// Node is the JavaScript interpreter.
	Node string `yaml:"node"`
	// CellIdleBudget is how long a cell may run without output (and with
	// no tool() call pending) before it is interrupted. An interrupted
	// cell's processes that still run (started since the cell began, in
	// the kernel's group or, under the relay, anywhere in its tree) are
	// killed before the result says the kernel is intact.
	CellIdleBudget time.Duration `yaml:"cell_idle_budget"`
	// InterruptGrace is how long an interrupted cell has to finish before
	// its kernel is killed.
	InterruptGrace time.Duration `yaml:"interrupt_grace"`
	// IdleTimeout shuts down a kernel no cell has used for this long.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// StartTimeout bounds a kernel's start, up to its ready handshake.
	StartTimeout time.Duration `yaml:"start_timeout"`
	// CellTimeout bounds one eval call however busy it is (the idle budget
	// is the usual limit; this catches a cell that keeps printing forever).
	CellTimeout time.Duration `yaml:"cell_timeout"`
	// OutputLimit caps a cell's printed output in bytes; the head and the
	// tail are kept and the cut is said.
	OutputLimit int `yaml:"output_limit"`
	// ImageLimit caps one image in bytes; a larger one is replaced by a
	// note saying so.
	ImageLimit int `yaml:"image_limit"`
	// MaxImages caps the images one cell returns.
	MaxImages int `yaml:"max_images"`
	// TableRows caps the rows of a DataFrame shown as a table.
	TableRows int `yaml:"table_rows"`
	// TableColumns caps the columns of a DataFrame shown as a table.
	TableColumns int `yaml:"table_columns"`
}

// DefaultConfig: python3 and node from the PATH, a five-minute idle budget,
// kernels culled after thirty minutes unused.
func DefaultConfig() Config {
	return Config{
		Python:         "python3",
		Node:           "node",
		CellIdleBudget: 5 * time.Minute,
		InterruptGrace: 10 * time.Second,
		IdleTimeout:    30 * time.Minute,
		StartTimeout:   30 * time.Second,
		CellTimeout:    2 * time.Hour,
		OutputLimit:    20000,
		ImageLimit:     2 << 20,
		MaxImages:      10,
		TableRows:      50,
		TableColumns:   30,
	}
}

// withDefaults fills zero fields, so a partial section still works.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Python == "" {
		c.Python = d.Python
	}
	if c.Node == "" {
		c.Node = d.Node
	}
	if c.CellIdleBudget <= 0 {
		c.CellIdleBudget = d.CellIdleBudget
	}
	if c.InterruptGrace <= 0 {
		c.InterruptGrace = d.InterruptGrace
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = d.IdleTimeout
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = d.StartTimeout
	}
	if c.CellTimeout <= 0 {
		c.CellTimeout = d.CellTimeout
	}
	if c.OutputLimit <= 0 {
		c.OutputLimit = d.OutputLimit
	}
	if c.ImageLimit <= 0 {
		c.ImageLimit = d.ImageLimit
	}
	if c.MaxImages <= 0 {
		c.MaxImages = d.MaxImages
	}
	if c.TableRows <= 0 {
		c.TableRows = d.TableRows
	}
	if c.TableColumns <= 0 {
		c.TableColumns = d.TableColumns
	}
	return c
}
