package rpc

import (
	"encoding/json"
	"strings"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/internal/errclass"
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

// UnmarshalJSON accepts a string or an object (the schema checked which).
func (e *EnclosureParam) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*e = EnclosureParam{Driver: s}
		return nil
	}
	return json.Unmarshal(b, (*enclosure.Spec)(e))
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
	// Resumed: the run existed before Berth restarted, and got back the
	// processes the Berth before left to their relays (its kernels, with
	// their variables).
	Resumed bool `json:"resumed,omitempty"`
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
	// CallID is the harness's stable id of this call, which a retry
	// sends again: Berth records it before it dispatches the call, and
	// never runs a call twice for one id (docs/protocol.md#call-ids).
	CallID string `json:"callId,omitempty"`
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

// decodeParams checks a request's params against its method's schema
// and decodes them into v. Every problem is an invalid-params *Error in the
// validator's words, which are a tool's arguments' words too.
func decodeParams(method string, raw []byte, v any) error {
	raw = orchestrator.ArgsOrEmpty(raw)
	if msg := paramSchemas[method].Check(raw); msg != "" {
		return failf(errclass.ErrInvalid, "invalid params for %s: %s. Fix the params and send the request again.", method, msg)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return failf(errclass.ErrInvalid, "invalid params for %s: %v", method, err)
	}
	return nil
}

// paramSchemas are the schemas of the protocol's own params, by method,
// checked by the validator that checks tools' arguments
// (orchestrator.Schema). A field a schema does not name is refused, so a
// misspelt one never passes silently.
var paramSchemas = func() map[string]*orchestrator.Schema {
	const (
		runID   = `"runId":{"type":"string","minLength":1,"description":"the run's id, as run/start returned it"}`
		surface = `"surface":{"type":"string","description":"\"full\" (the default), \"plan\" or \"readonly\""}`
		paths   = `"paths":{"type":"array","minItems":1,"items":{"type":"string","minLength":1},"description":"the paths written, relative to the run's working directory or absolute inside it"}`
		spec    = `"additionalProperties":false,"properties":{"driver":{"type":"string"},"id":{"type":"string"}}`
	)
	features := func(what string) string {
		return `"features":{"type":"object","additionalProperties":{"type":"boolean"},"description":"` + what + `, e.g. {\"lsp\": false}"}`
	}
	object := func(required string, props ...string) string {
		return `{"type":"object","additionalProperties":false,"required":[` + required + `],"properties":{` + strings.Join(props, ",") + `}}`
	}
	write := object(`"runId","paths"`, runID, paths)
	out := map[string]*orchestrator.Schema{}
	for method, schema := range map[string]string{
		"initialize": object(``, `"client":{"type":"object","additionalProperties":false,"properties":{"name":{"type":"string"},"version":{"type":"string"}}}`),
		"run/start": object(`"workdir"`,
			`"runId":{"type":"string","description":"an id of the harness's choosing (Berth makes one up when it is left out)"}`,
			`"conversationId":{"type":"string","description":"the conversation the run belongs to"}`,
			`"workdir":{"type":"string","minLength":1,"description":"the run's working directory, an absolute path"}`,
			`"enclosure":{"type":["string","object"],`+spec+`,"description":"\"host\", \"auto\" or an object {driver, id}"}`,
			features("the features to switch on or off")),
		"run/update":      object(`"runId","features"`, runID, features("the features to switch on or off")),
		"run/stop":        object(`"runId"`, runID),
		"tools/list":      object(`"runId"`, runID, surface),
		"tools/call":      object(`"runId","name"`, runID, surface, `"name":{"type":"string","minLength":1,"description":"the tool's name, as tools/list shows it"}`, `"arguments":{"description":"the tool's arguments, an object"}`, `"callId":{"type":"string","minLength":1,"maxLength":256,"pattern":"^[ -~]+$","description":"a stable id of the harness's for this call, sent again with a retry, so that Berth never runs the call twice: printable ASCII, at most 256 characters"}`),
		"files/willWrite": write,
		"files/didWrite":  write,
		// Not closed to other fields: an LSP client may send more.
		"$/cancelRequest": `{"type":"object","required":["id"],"properties":{"id":{"type":["string","integer"],"description":"the id of the request to cancel"}}}`,
	} {
		s, err := orchestrator.CompileSchema(method, json.RawMessage(schema))
		if err != nil {
			panic(err) // a literal above: the first test shows it
		}
		out[method] = s
	}
	return out
}()

// NewToolInfo is a tool's spec as tools/list shows it (Spec.Schema: a tool
// with no schema takes any object).
func NewToolInfo(sp orchestrator.Spec) ToolInfo {
	return ToolInfo{Name: sp.Name, Tier: sp.Tier.String(), Description: sp.Description, InputSchema: sp.Schema(), ParallelSafe: sp.ParallelSafe}
}
