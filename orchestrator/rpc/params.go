package rpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/orchestrator"
)

// ClientInfo names a program on either end.
type ClientInfo struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// InitializeParams are initialize's parameters.
type InitializeParams struct {
	Client ClientInfo `json:"client"`
}

// InitializeResult is initialize's result. Features lists the features
// this Berth has providers for.
type InitializeResult struct {
	Server          ClientInfo `json:"server"`
	ProtocolVersion string     `json:"protocolVersion"`
	Features        []string   `json:"features"`
}

// EnclosureParam is run/start's enclosure: a driver name as a string
// ("host", "auto") or an object {driver, id}.
type EnclosureParam enclosure.Spec

// UnmarshalJSON accepts a string or an object.
func (e *EnclosureParam) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*e = EnclosureParam{Driver: s}
		return nil
	}
	var spec enclosure.Spec
	if err := strictUnmarshal(b, &spec); err != nil {
		return fmt.Errorf("field \"enclosure\": must be \"host\", \"auto\" or an object {driver, id}: %v", err)
	}
	*e = EnclosureParam(spec)
	return nil
}

// StartRunParams are run/start's parameters.
type StartRunParams struct {
	RunID          string          `json:"runId,omitempty"`
	ConversationID string          `json:"conversationId,omitempty"`
	Workdir        string          `json:"workdir"`
	Enclosure      *EnclosureParam `json:"enclosure,omitempty"`
	Features       map[string]bool `json:"features,omitempty"`
}

// StartRunResult is run/start's result: the run's id, the enclosure that
// was chosen, and the features that are on.
type StartRunResult struct {
	RunID     string         `json:"runId"`
	Enclosure enclosure.Spec `json:"enclosure"`
	Features  []string       `json:"features"`
}

// UpdateRunParams are run/update's parameters.
type UpdateRunParams struct {
	RunID    string          `json:"runId"`
	Features map[string]bool `json:"features"`
}

// RunParams names a run (run/stop).
type RunParams struct {
	RunID string `json:"runId"`
}

// ListToolsParams are tools/list's parameters.
type ListToolsParams struct {
	RunID   string `json:"runId"`
	Surface string `json:"surface,omitempty"`
}

// ToolInfo is one tool as tools/list shows it.
type ToolInfo struct {
	Name         string          `json:"name"`
	Tier         string          `json:"tier"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	ParallelSafe bool            `json:"parallelSafe"`
}

// ListToolsResult is tools/list's result.
type ListToolsResult struct {
	Tools []ToolInfo `json:"tools"`
}

// CallToolParams are tools/call's parameters.
type CallToolParams struct {
	RunID     string          `json:"runId"`
	Surface   string          `json:"surface,omitempty"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// WriteParams are files/willWrite's and files/didWrite's parameters:
// paths relative to the run's working directory, or absolute inside it.
type WriteParams struct {
	RunID string   `json:"runId"`
	Paths []string `json:"paths"`
}

// AskParams are harness/ask's parameters.
type AskParams struct {
	RunID          string                `json:"runId"`
	Card           orchestrator.Question `json:"card"`
	TimeoutSeconds float64               `json:"timeoutSeconds,omitempty"`
}

// HarnessCallToolParams are harness/callTool's parameters.
type HarnessCallToolParams struct {
	RunID     string              `json:"runId"`
	Name      string              `json:"name"`
	Arguments json.RawMessage     `json:"arguments"`
	Origin    orchestrator.Origin `json:"origin"`
}

// decodeParams decodes a request's params into v (a pointer to a struct),
// refusing unknown fields and values of the wrong type, and checking that
// each required field is present and not empty. Every error is an
// invalid-params *Error that names the field.
func decodeParams(method string, raw []byte, v any, required ...string) error {
	bad := func(format string, a ...any) error {
		return Errorf(CodeInvalidParams, "invalid params for %s: %s", method, fmt.Sprintf(format, a...))
	}
	raw = orchestrator.ArgsOrEmpty(raw)
	if kindOf(raw) != "object" {
		return bad("params must be an object of named fields, got %s", kindOf(raw))
	}
	if err := strictUnmarshal(raw, v); err != nil {
		return bad("%s", describeDecodeError(err, v))
	}
	for _, f := range required {
		if empty(v, f) {
			return bad("field %q is required", f)
		}
	}
	return nil
}

// empty says the decoded field with that JSON name was missing, null, ""
// or []: its string or slice is empty, its map or pointer nil. Reading the
// decoded struct spares a second parse of the params. A required field
// must be one of those kinds (a number's zero is a value); one that is
// not panics, so the mistake shows in the first test.
func empty(v any, name string) bool {
	rv := reflect.ValueOf(v).Elem()
	t := rv.Type()
	for i := range t.NumField() {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if tag != name {
			continue
		}
		f := rv.Field(i)
		switch f.Kind() {
		case reflect.String:
			return f.Len() == 0
		case reflect.Slice:
			if raw, ok := f.Interface().(json.RawMessage); ok {
				s := string(bytes.TrimSpace(raw))
				return s == "" || s == "null" || s == `""` || s == "[]"
			}
			return f.Len() == 0
		case reflect.Map, reflect.Pointer, reflect.Interface:
			return f.IsNil()
		}
		panic(fmt.Sprintf("rpc: required field %q of %s is a %s, which cannot be told missing", name, t, f.Kind()))
	}
	panic(fmt.Sprintf("rpc: %s has no field %q", t, name))
}

func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// describeDecodeError turns encoding/json's errors into a sentence that
// names the field and says what was expected.
func describeDecodeError(err error, v any) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "(params)"
		}
		return fmt.Sprintf("field %q: expected %s, got %s", field, jsonKind(te.Type), te.Value)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Sprintf("unknown field %s; the known fields are %s", name, strings.Join(fieldNames(v), ", "))
	}
	// A field's own UnmarshalJSON (enclosure) failed.
	return err.Error()
}

func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int64, reflect.Float64, reflect.Int32:
		return "a number"
	case reflect.Slice:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

// fieldNames lists the JSON names of a struct's fields.
func fieldNames(v any) []string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var names []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// NewToolInfo is a tool's spec as tools/list shows it (Spec.Schema: a tool
// with no schema takes any object).
func NewToolInfo(sp orchestrator.Spec) ToolInfo {
	return ToolInfo{Name: sp.Name, Tier: sp.Tier.String(), Description: sp.Description, InputSchema: sp.Schema(), ParallelSafe: sp.ParallelSafe}
}
