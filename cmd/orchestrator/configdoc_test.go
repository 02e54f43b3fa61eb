package main

import (
	"bytes"
	"flag"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/berth-dev/berth/cmd/orchestrator/internal/configdoc"
)

var update = flag.Bool("update", false, "rewrite docs/configuration.md from the configuration structs (go generate ./cmd/orchestrator)")

const configDocPath = "../../docs/configuration.md"

// The configuration reference is generated from the code: the file on
// disk is what configdoc renders from the structs, their defaults and
// their doc comments, byte for byte. Run go generate ./cmd/orchestrator
// after changing a configuration struct.
func TestConfigurationDocMatchesTheCode(t *testing.T) {
	want, err := renderConfigDoc()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(configDocPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(configDocPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("docs/configuration.md differs from the code at line %d:\n file: %s\n code: %s\nrun go generate ./cmd/orchestrator", i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("docs/configuration.md has %d lines, the code renders %d: run go generate ./cmd/orchestrator", len(gl), len(wl))
	}
}

// Every key "orchestrator config" can print, of every section (the core's
// and each tool family's), has a heading of its own in
// docs/configuration.md, as `section.key` (`section.list[].key` inside a
// list of entries).
func TestConfigurationDocNamesEveryConfigKey(t *testing.T) {
	doc, err := os.ReadFile(configDocPath)
	if err != nil {
		t.Fatal(err)
	}
	c := defaultConfig()
	keys, ptrs, err := sections(&c)
	if err != nil {
		t.Fatal(err)
	}
	for i, section := range keys {
		for _, key := range configKeys(section, reflect.TypeOf(ptrs[i]).Elem()) {
			if !bytes.Contains(doc, []byte("\n### `"+key+"`\n")) {
				t.Errorf("docs/configuration.md does not document %s: give the field a doc comment and run go generate ./cmd/orchestrator", key)
			}
		}
	}
}

// configKeys lists the dotted YAML keys of a configuration struct; the
// fields of a list's entries are named with "[]".
func configKeys(prefix string, t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		key := prefix + "." + name
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Struct:
			// A group of keys (vibe.runners): its keys are documented.
			out = append(out, configKeys(key, ft)...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			out = append(out, key)
			out = append(out, configKeys(key+"[]", ft.Elem())...)
		default:
			out = append(out, key)
		}
	}
	return out
}

// renderConfigDoc renders docs/configuration.md from the sections this
// binary has.
func renderConfigDoc() ([]byte, error) {
	c := defaultConfig()
	keys, ptrs, err := sections(&c)
	if err != nil {
		return nil, err
	}
	doc := configdoc.Doc{Head: configDocHead}
	for i, k := range keys {
		doc.Sections = append(doc.Sections, configdoc.Section{Key: k, Config: ptrs[i], About: sectionAbout[k]})
	}
	return configdoc.Render(configdoc.Source{Module: "github.com/berth-dev/berth", Root: "../..", Main: "."}, doc)
}

// sectionAbout says what each section configures; a section missing here
// renders with an empty line, which the test of the links does not mind
// but a reader would.
var sectionAbout = map[string]string{
	"rpc":        "the harness protocol's listeners, token and message limit ([protocol](protocol.md)).",
	"runs":       "how long runs and tool calls live ([runs](protocol.md#runs)).",
	"env":        "what the processes Berth starts do not inherit.",
	"log":        "Berth's own log.",
	"enclosure":  "where a run's processes live: which containers `\"auto\"` looks for, and whether the host may stand in ([enclosures](enclosures/overview.md)).",
	"docker":     "the Docker driver ([Docker](enclosures/docker.md)).",
	"containerd": "the containerd driver ([containerd](enclosures/containerd.md)).",
	"kubernetes": "the Kubernetes driver ([Kubernetes](enclosures/kubernetes.md)).",
	"debug":      "the `debug` tool, package `orchestrator/debug` ([debug](tools/debug.md)).",
	"kernels":    "the `eval` tool, package `orchestrator/kernel` ([eval](tools/eval.md)).",
	"lsp":        "the language servers behind `lsp`, `lsp_rename` and diagnostics on write, package `orchestrator/lsp` ([lsp](tools/lsp.md)).",
	"questions":  "the `ask_user` tool, package `orchestrator/ask` ([ask](tools/ask.md)).",
	"structural": "`ast_grep`, `ast_edit` and `resolve`, package `orchestrator/structural` ([structural](tools/structural.md)).",
	"vibe":       "the `vibe_*` tools, package `orchestrator/vibe` ([vibe](tools/vibe.md)).",
}

const configDocHead = "# Configuration\n\n" +
	"Berth reads one YAML file (`orchestrator serve --config FILE`); every key has a built-in default, so Berth runs without one. " +
	"This page lists every key of every section with its default and its meaning. " +
	"It is generated from the configuration structs and their doc comments " +
	"(`cmd/orchestrator/internal/configdoc`): edit those and run `go generate ./cmd/orchestrator`, never this file; " +
	"`TestConfigurationDocMatchesTheCode` fails when the two disagree.\n\n" +
	"## The file\n\n" +
	"- `orchestrator config [--config FILE]` prints the effective configuration, every section, as YAML: keys and values only.\n" +
	"- A key the file names that Berth does not know is an error that names it and its line.\n" +
	"- Durations are written as `30s`, `5m`, `1h`.\n" +
	"- A list (`lsp.servers`, `structural.grammars`, `debug.adapters`) given in the file replaces the built-in list as a whole: " +
	"copy the entries you keep from `orchestrator config`.\n\n" +
	"## An example\n\n" +
	"A configuration file for a machine with a worker command and a Python virtual environment elsewhere:\n\n" +
	"```yaml\n" +
	"rpc:\n  listen: 127.0.0.1:7171\n" +
	"runs:\n  idle_timeout: 30m\n" +
	"kernels:\n  python: /opt/venvs/data/bin/python\n" +
	"vibe:\n  runners:\n    fast: [my-agent, --model, small, --print]\n    good: [my-agent, --model, large, --print]\n" +
	"```"
