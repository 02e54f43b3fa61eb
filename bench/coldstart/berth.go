package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/berth-dev/berth/bench/internal/berthserver"
)

// python is the interpreter with debugpy, on the host and in the images.
const python = "/usr/bin/python3"

// hasWarm says whether the binary knows prewarm and parking (the keys
// lsp.prewarm_max and lsp.keep_warm; issue 28 items 1 and 2).
func hasWarm(bin string) (bool, error) {
	out, err := exec.Command(bin, "config").CombinedOutput()
	if err != nil {
		return false, fmt.Errorf("%s config: %v: %s", bin, err, out)
	}
	return strings.Contains(string(out), "keep_warm:") && strings.Contains(string(out), "prewarm_max:"), nil
}

// startServer starts bin serve --stdio with berth-NAME.yaml: debug's
// interpreter, and the lsp keys of the mode.
func startServer(bin, tmp, name, lspYAML string) (*berthserver.Server, error) {
	return berthserver.Start(bin, tmp, name, "bench-coldstart", fmt.Sprintf("debug:\n  python: %s\n%s", python, lspYAML))
}

// conversation names this process's conversations, one a run.
var conversation = fmt.Sprintf("bench-coldstart-%d", os.Getpid())
