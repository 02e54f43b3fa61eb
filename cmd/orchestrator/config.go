package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/berth-dev/berth/enclosure/containerd"
	"github.com/berth-dev/berth/enclosure/docker"
	"github.com/berth-dev/berth/enclosure/kubernetes"
	"github.com/berth-dev/berth/orchestrator"
	"github.com/berth-dev/berth/orchestrator/rpc"
	"github.com/berth-dev/berth/orchestrator/serve"
)

// config is the core's part of the configuration file; each component
// (wire_*.go) adds its own section.
type config struct {
	RPC       rpcConfig       `yaml:"rpc"`
	Runs      runsConfig      `yaml:"runs"`
	Env       envConfig       `yaml:"env"`
	Log       logConfig       `yaml:"log"`
	Enclosure enclosureConfig `yaml:"enclosure"`
	State     stateConfig     `yaml:"state"`
	// Docker is the docker driver's section.
	Docker docker.Config `yaml:"docker"`
	// Containerd is the containerd driver's section.
	Containerd containerd.Config `yaml:"containerd"`
	// Kubernetes is the kubernetes driver's section.
	Kubernetes kubernetes.Config `yaml:"kubernetes"`
}

type rpcConfig struct {
	// Listen is the TCP address of the HTTP listener (WebSocket at
	// /v1/rpc, /metrics, /healthz, /readyz); `serve --listen` overrides
	// it. Empty: none, and serve then needs --stdio or --unix.
	Listen string `yaml:"listen"`
	// Unix, when set, also serves the same HTTP endpoints on a unix socket
	// at this path, of mode 0600 and without a token.
	Unix string `yaml:"unix"`
	// TokenFile holds the bearer token (`serve --token-file` overrides
	// it); empty: BERTH_TOKEN, else a generated token written to a file
	// only the user can read ($XDG_RUNTIME_DIR/berth/token, else
	// ~/.local/share/berth/token).
	TokenFile string `yaml:"token_file"`
	// MaxMessageBytes bounds one protocol message, in bytes, both ways: a
	// larger message is skipped and answered with -32600, a larger result
	// is not sent and its request is answered with -32603. Set the same
	// limit on both ends.
	MaxMessageBytes int64 `yaml:"max_message_bytes"`
}

type runsConfig struct {
	// IdleTimeout ends a run with no call for this long (0: never); a call
	// in flight is never idle.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// DisconnectGrace is how long a closed connection's runs live on
	// before they are ended.
	DisconnectGrace time.Duration `yaml:"disconnect_grace"`
	// ReaperInterval is how often idle runs are looked for.
	ReaperInterval time.Duration `yaml:"reaper_interval"`
	// HandoffTimeout bounds how long a handoff (SIGUSR2, `orchestrator
	// handoff`) waits for the calls in flight to be answered; the calls
	// still running then are cut off (a tools/call whose tool is not a
	// read with -32008, its result unknown; any other with -32007,
	// restarting).
	HandoffTimeout time.Duration `yaml:"handoff_timeout"`
	// CallTimeout bounds a tool call whose tool names no timeout.
	//
	// Every tool call is answered by its deadline or its cancellation,
	// even when the tool's work does not stop (a read that blocks for
	// ever, a library call that ignores cancellation). When its call is
	// cancelled (`$/cancelRequest`, answered -32800), past its deadline,
	// or its run ends, a tool has a short grace (2s; eval:
	// `kernels.interrupt_grace` and 5s) to answer for itself, so the
	// model still reads what an interrupted cell printed; after that the
	// call is answered without it, with an error saying it timed out or
	// was cancelled and did not stop. Work that has not returned is left
	// to finish in the background and counted in `berth_stuck_calls`
	// until it does; a tool that must not overlap itself (eval, debug)
	// stays held by it, so the run's next call of that tool waits, up to
	// its own deadline.
	CallTimeout time.Duration `yaml:"call_timeout"`
}

type envConfig struct {
	// Drop names variables of Berth's environment that no process it
	// starts inherits (language servers, kernels, debug adapters and their
	// programs, workers, and what they start), such as
	// [AWS_SECRET_ACCESS_KEY, GITHUB_TOKEN]. BERTH_TOKEN never reaches
	// them, listed or not.
	Drop []string `yaml:"drop"`
}

type stateConfig struct {
	// Dir is Berth's state directory (`serve --state-dir` overrides it):
	// a record of each process that outlives a Berth that goes away
	// without stopping it (an eval kernel, a launched debug session, a
	// language server) and of each live run, so that a Berth started
	// again on the same directory finds them. It is made with mode 0700 if
	// missing; one with another owner or mode is refused, and so is a
	// second live Berth on it. Empty: a directory of this Berth's own
	// under $XDG_RUNTIME_DIR/berth/state (else ~/.local/state/berth),
	// removed when Berth stops in order; where none can be made, Berth
	// logs it once and runs without keeping anything. Survival across a
	// restart needs the same directory named here, on storage that
	// outlives Berth (see docs/operations/restarts.md).
	Dir string `yaml:"dir"`
}

type logConfig struct {
	// Level is debug, info, warn or error; logs go to stderr.
	Level string `yaml:"level"`
}

func defaultConfig() config {
	return config{
		RPC: rpcConfig{Listen: "127.0.0.1:7070", MaxMessageBytes: rpc.DefaultMaxMessageSize},
		Runs: runsConfig{
			IdleTimeout:     time.Hour,
			DisconnectGrace: rpc.DefaultDisconnectGrace,
			ReaperInterval:  time.Minute,
			HandoffTimeout:  serve.DefaultHandoffTimeout,
			CallTimeout:     orchestrator.DefaultCallTimeout,
		},
		Env:        envConfig{Drop: []string{}},
		Log:        logConfig{Level: "info"},
		Enclosure:  defaultEnclosureConfig(),
		Docker:     docker.DefaultConfig(),
		Containerd: containerd.DefaultConfig(),
		Kubernetes: kubernetes.DefaultConfig(),
	}
}

// sections pairs each YAML key with the struct it decodes into: the core's
// sections, then every registered component's, sorted.
func sections(c *config) ([]string, []any, error) {
	keys := []string{"rpc", "runs", "env", "log", "enclosure", "state", "docker", "containerd", "kubernetes"}
	ptrs := []any{&c.RPC, &c.Runs, &c.Env, &c.Log, &c.Enclosure, &c.State, &c.Docker, &c.Containerd, &c.Kubernetes}
	comps := append([]component(nil), components...)
	sort.Slice(comps, func(i, j int) bool { return comps[i].section < comps[j].section })
	seen := map[string]bool{}
	for _, k := range keys {
		seen[k] = true
	}
	for _, comp := range comps {
		if seen[comp.section] {
			return nil, nil, fmt.Errorf("configuration section %q is claimed twice", comp.section)
		}
		seen[comp.section] = true
		keys = append(keys, comp.section)
		ptrs = append(ptrs, comp.config)
	}
	return keys, ptrs, nil
}

// document builds a struct value whose fields point at every section, so
// one strict decode fills them all (with the file's line numbers in
// errors) and one encode prints them in order.
func document(c *config) (reflect.Value, error) {
	keys, ptrs, err := sections(c)
	if err != nil {
		return reflect.Value{}, err
	}
	fields := make([]reflect.StructField, len(keys))
	for i, k := range keys {
		fields[i] = reflect.StructField{
			Name: fmt.Sprintf("S%d", i),
			Type: reflect.TypeOf(ptrs[i]),
			Tag:  reflect.StructTag(fmt.Sprintf(`yaml:%q`, k)),
		}
	}
	doc := reflect.New(reflect.StructOf(fields))
	for i, p := range ptrs {
		doc.Elem().Field(i).Set(reflect.ValueOf(p))
	}
	return doc, nil
}

// loadConfig returns the defaults overlaid with the file (if path is not
// empty). Unknown keys are errors that name them.
func loadConfig(path string) (*config, error) {
	c := defaultConfig()
	if path == "" {
		return &c, c.check()
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	doc, err := document(&c)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(doc.Interface()); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config %s: %s (run \"orchestrator config\" to see every key and its default)", path, strings.ReplaceAll(err.Error(), "\n", " "))
	}
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return &c, nil
}

func (c *config) check() error {
	switch {
	case c.RPC.MaxMessageBytes <= 0:
		return fmt.Errorf("rpc.max_message_bytes must be positive, got %d", c.RPC.MaxMessageBytes)
	case c.Runs.IdleTimeout < 0:
		return fmt.Errorf("runs.idle_timeout must be 0 (never) or positive, got %s", c.Runs.IdleTimeout)
	case c.Runs.DisconnectGrace < 0:
		return fmt.Errorf("runs.disconnect_grace must be 0 or positive, got %s", c.Runs.DisconnectGrace)
	case c.Runs.HandoffTimeout <= 0:
		return fmt.Errorf("runs.handoff_timeout must be positive, got %s", c.Runs.HandoffTimeout)
	case c.Runs.ReaperInterval <= 0:
		return fmt.Errorf("runs.reaper_interval must be positive, got %s", c.Runs.ReaperInterval)
	case c.Runs.CallTimeout <= 0:
		return fmt.Errorf("runs.call_timeout must be positive, got %s", c.Runs.CallTimeout)
	}
	for _, name := range c.Env.Drop {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			return fmt.Errorf("env.drop: %q is not a variable name: list names only, such as AWS_SECRET_ACCESS_KEY", name)
		}
	}
	if _, err := parseLevel(c.Log.Level); err != nil {
		return err
	}
	if err := c.Enclosure.check(); err != nil {
		return err
	}
	if err := c.Docker.Check(); err != nil {
		return err
	}
	if err := c.Containerd.Check(); err != nil {
		return err
	}
	return c.Kubernetes.Check()
}

// writeConfig prints the effective configuration, every section.
func writeConfig(w io.Writer, c *config) error {
	doc, err := document(c)
	if err != nil {
		return err
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(doc.Interface()); err != nil {
		return err
	}
	return enc.Close()
}
