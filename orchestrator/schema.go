package orchestrator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// inputSchema is a tool's input schema, compiled: the full validator,
// and the quick check (argSchema) when the schema uses only what it
// handles.
type inputSchema struct {
	full  *jsonschema.Schema
	quick *argSchema // nil: every call goes through full
}

// compileSchema compiles a tool's input schema. A tool whose schema does
// not compile is a programming error, reported when it is first listed.
func compileSchema(name string, raw json.RawMessage) (*inputSchema, error) {
	if len(raw) == 0 {
		raw = json.RawMessage(`{"type":"object"}`)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("tool %s: input schema is not JSON: %w", name, err)
	}
	c := jsonschema.NewCompiler()
	url := "berth:///tools/" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("tool %s: input schema: %w", name, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("tool %s: input schema: %w", name, err)
	}
	return &inputSchema{full: s, quick: compileArgSchema(raw)}, nil
}

// validateArgs checks args against the schema and returns a sentence that
// names each offending field, or "" when they are valid.
func validateArgs(sch *inputSchema, args json.RawMessage) string {
	if t := bytes.TrimSpace(args); len(t) == 0 || string(t) == "null" {
		args = json.RawMessage("{}")
	}
	if sch.quick != nil && sch.quick.valid(args) {
		return ""
	}
	s := sch.full
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return "arguments are not valid JSON: " + err.Error()
	}
	if _, ok := inst.(map[string]any); !ok {
		return "arguments must be a JSON object of named fields"
	}
	err = s.Validate(inst)
	if err == nil {
		return ""
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return err.Error()
	}
	var msgs []string
	seen := map[string]bool{}
	for _, u := range ve.BasicOutput().Errors {
		if u.Error == nil {
			continue
		}
		msg := u.Error.String()
		if strings.HasPrefix(msg, "validation failed") || strings.HasPrefix(msg, "oneOf failed") || strings.HasPrefix(msg, "anyOf failed") {
			continue
		}
		where := strings.TrimPrefix(u.InstanceLocation, "/")
		if where != "" {
			msg = fmt.Sprintf("field %q: %s", strings.ReplaceAll(where, "/", "."), msg)
		}
		if !seen[msg] {
			seen[msg] = true
			msgs = append(msgs, msg)
		}
	}
	if len(msgs) == 0 {
		return ve.Error()
	}
	sort.Strings(msgs)
	return strings.Join(msgs, "; ")
}
