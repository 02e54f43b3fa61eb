// Package ipykernel drives ipykernel through jupyter_client, the anchor
// bench/kernel and bench/enclosure measure Berth's kernels against. The
// script, ipykernel.py, takes commands on stdin so a benchmark can
// interleave them with Berth's and both see the same machine.
package ipykernel

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"
)

//go:embed ipykernel.py
var script string

// Kernel is one running ipykernel.py.
type Kernel struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *strings.Builder
}

// New starts the script under python, which needs ipykernel and
// jupyter_client. The caller ends it with Close.
func New(python string) (*Kernel, error) {
	// With -c: run as a file, its directory would come first on sys.path
	// and jupyter_client's "import ipykernel" would import the script
	// itself. ipykernel's debugger warns about frozen modules on every
	// start: stderr is shown only if the script fails.
	cmd := exec.Command(python, "-c", script)
	k := &Kernel{cmd: cmd, stderr: &strings.Builder{}}
	cmd.Stderr = k.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	k.in, k.out = in, bufio.NewReader(out)
	return k, nil
}

func (k *Kernel) ask(command string, v any) error {
	if _, err := fmt.Fprintln(k.in, command); err != nil {
		return err
	}
	line, err := k.out.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("ipykernel %s: %v\n%s", command, err, k.stderr.String())
	}
	return json.Unmarshal(line, v)
}

// Start (re)starts the kernel and returns how long that took.
func (k *Kernel) Start() (time.Duration, error) {
	var s float64
	err := k.ask("start", &s)
	return seconds(s), err
}

// Rounds runs the cell "1+1" n times and returns each round trip.
func (k *Kernel) Rounds(n int) ([]time.Duration, error) {
	var s []float64
	if err := k.ask(fmt.Sprintf("rounds %d", n), &s); err != nil {
		return nil, err
	}
	out := make([]time.Duration, len(s))
	for i, v := range s {
		out[i] = seconds(v)
	}
	return out, nil
}

// Close stops the kernel and waits for the script to exit.
func (k *Kernel) Close() {
	_, _ = fmt.Fprintln(k.in, "quit")
	_ = k.in.Close()
	_ = k.cmd.Wait()
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
