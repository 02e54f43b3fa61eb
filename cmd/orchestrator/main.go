// Command orchestrator is Berth's binary: it serves the harness protocol
// (serve), lists and calls tools without a harness (tools, call), prints
// the effective configuration (config) and its version (version).
//
// It holds flags, configuration and wiring only: every behaviour lives in
// the orchestrator packages. Tool families plug in through wire_*.go.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/metrics"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3";
// otherwise the module's version (or "devel") is used.
var version = ""

const usage = `usage: orchestrator <command> [flags]

commands:
  serve    serve the harness protocol (stdio, WebSocket, unix socket)
  handoff  ask a serving Berth to hand off to a new one (upgrade, rolling update)
  tools    list the tools a run would see
  call     run one tool once, without a harness
  config   print the effective configuration as YAML
  version  print the version

Run "orchestrator <command> -h" for a command's flags.
`

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		var ex exitError
		if errors.As(err, &ex) {
			os.Exit(int(ex))
		}
		fmt.Fprintln(os.Stderr, "orchestrator:", err)
		os.Exit(1)
	}
}

// exitError is an exit status whose message was already printed.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitError(2)
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return serveCmd(rest, stderr)
	case "handoff":
		return handoffCmd(rest, stdout, stderr)
	case "tools":
		return toolsCmd(rest, stdout, stderr)
	case "call":
		return callCmd(rest, stdout, stderr)
	case "config":
		return configCmd(rest, stdout, stderr)
	case "version":
		fmt.Fprintf(stdout, "berth %s (%s)\n", buildVersion(), runtime.Version())
		return nil
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprintf(stderr, "unknown command %q\n\n%s", cmd, usage)
	return exitError(2)
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// newFlags makes a command's flag set; parse errors print usage and exit 2.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("orchestrator "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return exitError(2)
	}
	return nil
}

func configCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("config", stderr)
	file := fs.String("config", "", "configuration file (YAML); every key has a default")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*file)
	if err != nil {
		return err
	}
	return writeConfig(stdout, cfg)
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("log.level %q: use debug, info, warn or error", s)
	}
	return l, nil
}

func newLogger(cfg *config, stderr io.Writer) *slog.Logger {
	level, _ := parseLevel(cfg.Log.Level)
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
}

// build wires the registry: metrics on a registry of our own, then every
// component with its configuration section. (env.drop goes to the host
// enclosure: enclosures.)
func build(cfg *config, log *slog.Logger) (*deps, *prometheus.Registry, error) {
	preg := prometheus.NewRegistry()
	m := metrics.New(preg, buildVersion())
	reg := orchestrator.NewRegistry(m, cfg.Runs.CallTimeout)
	d := &deps{Registry: reg, Metrics: m, Log: log, Resumers: map[string]orchestrator.Resumer{}, Takers: map[string]orchestrator.Taker{}}
	for _, c := range components {
		if err := c.build(d); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", c.section, err)
		}
	}
	addTestTools(reg, log)
	return d, preg, nil
}

// featureFlag parses --features "questions,vibe,-lsp": names to turn on,
// and with a leading "-", off.
func featureFlag(s string) map[string]bool {
	f := map[string]bool{}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if off, ok := strings.CutPrefix(name, "-"); ok {
			f[off] = false
		} else {
			f[name] = true
		}
	}
	return f
}
