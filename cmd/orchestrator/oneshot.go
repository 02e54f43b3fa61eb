package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
)

// noHarness is the harness of a one-shot run: nobody is on the other end.
type noHarness struct{}

var errNoHarness = errors.New("no harness connected: this is a one-shot \"orchestrator call\" run with no human and no harness tools; run the tool through \"orchestrator serve\" from a harness instead")

func (noHarness) CallTool(context.Context, orchestrator.ToolCall) (json.RawMessage, error) {
	return nil, errNoHarness
}

func (noHarness) Ask(context.Context, orchestrator.Question) (*orchestrator.Answer, error) {
	return nil, errNoHarness
}

// oneShot holds what tools and call share: flags, the registry and a run
// that ends when the command does.
type oneShot struct {
	file, workdir, surface, features, conversation *string
	asJSON                                         *bool
}

func oneShotFlags(name string, stderr io.Writer) (*oneShot, *flag.FlagSet) {
	fs := newFlags(name, stderr)
	o := &oneShot{
		file:         fs.String("config", "", "configuration file (YAML); every key has a default"),
		workdir:      fs.String("workdir", ".", "the run's working directory"),
		surface:      fs.String("surface", "full", "full, plan or readonly"),
		features:     fs.String("features", "", "features to turn on (\"questions,vibe\") or off (\"-lsp\")"),
		conversation: fs.String("conversation", "", "the run's conversation id (debug needs one)"),
		asJSON:       fs.Bool("json", false, "print JSON"),
	}
	return o, fs
}

// start loads the configuration, builds the registry and starts a run.
// The returned stop ends the run.
func (o *oneShot) start(ctx context.Context, stderr io.Writer) (*orchestrator.Registry, *orchestrator.Run, orchestrator.Surface, func(), error) {
	surface, err := orchestrator.ParseSurface(*o.surface)
	if err != nil {
		return nil, nil, "", nil, err
	}
	cfg, err := loadConfig(*o.file)
	if err != nil {
		return nil, nil, "", nil, err
	}
	log := newLogger(cfg, stderr)
	d, _, err := build(cfg, log)
	if err != nil {
		return nil, nil, "", nil, err
	}
	reg, m := d.Registry, d.Metrics
	wd, err := filepath.Abs(*o.workdir)
	if err != nil {
		return nil, nil, "", nil, err
	}
	// The host, unless enclosure.host_fallback forbids it.
	runs := orchestrator.NewRuns(m, 0, enclosures(cfg, log))
	runs.WriteReadOnlyMounts = cfg.Enclosure.WriteReadOnlyMounts
	run, err := runs.Start(ctx, orchestrator.StartParams{Workdir: wd, ConversationID: *o.conversation, Features: featureFlag(*o.features), Harness: noHarness{}})
	if err != nil {
		// The class word the core appends for the protocol's error codes
		// means nothing on a command line.
		return nil, nil, "", nil, errors.New(strings.TrimSuffix(err.Error(), ": "+orchestrator.ErrInvalid.Error()))
	}
	// No OnStart: a one-shot command's call starts what it needs itself.
	// Its run ends with Berth, so nothing is parked; Shutdown all the same.
	return reg, run, surface, func() { runs.StopAll(); reg.Shutdown() }, nil
}

func toolsCmd(args []string, stdout, stderr io.Writer) error {
	o, fs := oneShotFlags("tools", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("tools takes no arguments, got %q", fs.Args())
	}
	reg, run, surface, stop, err := o.start(context.Background(), stderr)
	if err != nil {
		return err
	}
	defer stop()
	specs := reg.List(run, surface)
	if *o.asJSON {
		out := rpc.ListToolsResult{Tools: []rpc.ToolInfo{}}
		for _, s := range specs {
			out.Tools = append(out.Tools, rpc.NewToolInfo(s))
		}
		return writeJSON(stdout, out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTIER\tDESCRIPTION")
	for _, s := range specs {
		desc, _, _ := strings.Cut(s.Description, "\n")
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, s.Tier, desc)
	}
	return tw.Flush()
}

func callCmd(args []string, stdout, stderr io.Writer) error {
	o, fs := oneShotFlags("call", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		fmt.Fprintln(stderr, "usage: orchestrator call [--workdir DIR] [--surface S] [--json] TOOL ['{\"arg\": ...}']")
		return exitError(2)
	}
	// No arguments are the registry's to default (orchestrator.ArgsOrEmpty).
	name, rawArgs := fs.Arg(0), ""
	if fs.NArg() == 2 {
		rawArgs = fs.Arg(1)
		if !json.Valid([]byte(rawArgs)) {
			return fmt.Errorf("arguments %q are not valid JSON: pass one JSON object, e.g. '{\"file\": \"main.go\"}'", rawArgs)
		}
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	reg, run, surface, stop, err := o.start(ctx, stderr)
	if err != nil {
		return err
	}
	defer stop()
	res, err := reg.Call(ctx, run, surface, name, json.RawMessage(rawArgs))
	if err != nil {
		return err
	}
	if *o.asJSON {
		if err := writeJSON(stdout, res); err != nil {
			return err
		}
	} else {
		printResult(stdout, res)
	}
	if res.IsError {
		return exitError(1)
	}
	return nil
}

// printResult writes a result for a person: text as it is, tables as
// aligned columns, images as a note.
func printResult(w io.Writer, res *orchestrator.Result) {
	for _, b := range res.Content {
		switch b.Type {
		case "text":
			fmt.Fprintln(w, strings.TrimRight(b.Text, "\n"))
		case "image":
			fmt.Fprintf(w, "[image %s, %d bytes of base64; use --json to get it]\n", b.MimeType, len(b.Data))
		case "table":
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, strings.Join(b.Columns, "\t"))
			for _, r := range b.Rows {
				fmt.Fprintln(tw, strings.Join(r, "\t"))
			}
			_ = tw.Flush()
			if b.Truncated {
				fmt.Fprintln(w, "(rows truncated)")
			}
		}
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
