package orchestrator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// inputSchema is a tool's input schema, compiled once, and its text
// decoded: error messages take the fields' descriptions and the
// conditions of if/then chains from it.
type inputSchema struct {
	compiled *jsonschema.Schema
	doc      any
}

// compileSchema compiles a tool's input schema (Spec.Schema). A tool whose
// schema does not compile is a programming error, reported when it is
// first listed.
func compileSchema(name string, raw json.RawMessage) (*inputSchema, error) {
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
	return &inputSchema{compiled: s, doc: doc}, nil
}

// Schema is a JSON Schema compiled once, with Berth's wording of what it
// refuses: the one validator of tools' arguments (the registry's) and of
// the protocol's own params (orchestrator/rpc), so both are refused in the
// same words.
type Schema struct {
	name string
	s    *inputSchema
}

// CompileSchema compiles the schema of the tool or method name, which the
// sentences use as their subject ("run/start needs \"workdir\"").
func CompileSchema(name string, schema json.RawMessage) (*Schema, error) {
	s, err := compileSchema(name, schema)
	if err != nil {
		return nil, err
	}
	return &Schema{name: name, s: s}, nil
}

// Check returns sentences that name each offending field of v and say what
// to pass, or "" when v is valid.
func (s *Schema) Check(v json.RawMessage) string { return validateArgs(s.name, s.s, v) }

// When is one link of a chain keyed on a field (action, operation): Then
// is what the arguments must also satisfy when the field is one of
// Values.
type When struct {
	Values []string
	Then   map[string]any
}

// Chain is a tool's schema, base with the links added as one nested
// if/then/else, the first link outermost. Nesting, not oneOf, anyOf or
// allOf, keeps the schema acceptable to model APIs that refuse those at a
// schema's top level. Validation errors inside a link are worded with the
// field's value ("definition needs ..."), and a "description" in a link's
// Then is the instruction given when it is not met. Each link's keys are
// written in the order if, then, else, as a reader follows them. It
// panics on a base that cannot be written as JSON: schemas are built once,
// from literals.
func Chain(base map[string]any, key string, links ...When) json.RawMessage {
	b, err := json.Marshal(base)
	if err != nil {
		panic(fmt.Sprintf("schema: %v", err))
	}
	var first, last *chainLink
	for _, l := range links {
		var cond any = map[string]any{"const": l.Values[0]}
		if len(l.Values) > 1 {
			cond = map[string]any{"enum": l.Values}
		}
		next := &chainLink{If: map[string]any{"properties": map[string]any{key: cond}, "required": []string{key}}, Then: l.Then}
		if first == nil {
			first = next
		} else {
			last.Else = next
		}
		last = next
	}
	if first == nil {
		return b
	}
	c, err := json.Marshal(first)
	if err != nil {
		panic(fmt.Sprintf("schema: %v", err))
	}
	if len(base) > 0 {
		c[0] = ','
	} else {
		c = c[1:]
	}
	return append(b[:len(b)-1], c...)
}

// chainLink is one link of Chain's if/then/else, written in that order.
type chainLink struct {
	If   map[string]any `json:"if"`
	Then map[string]any `json:"then"`
	Else *chainLink     `json:"else,omitempty"`
}

// validateArgs checks a tool's arguments (ArgsOrEmpty) against its schema
// and returns sentences that name each offending field and say what to
// pass, or "" when they are valid.
func validateArgs(tool string, sch *inputSchema, args json.RawMessage) string {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return "arguments are not valid JSON: " + err.Error()
	}
	obj, ok := inst.(map[string]any)
	if !ok {
		return "arguments must be a JSON object of named fields"
	}
	err = sch.compiled.Validate(inst)
	if err == nil {
		return ""
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	return explain(tool, sch.doc, obj, ve)
}

// problem is one failed keyword: where in the arguments, the schema
// object it belongs to, and the link of a keyed chain it lies in (nil
// outside one).
type problem struct {
	err   *jsonschema.ValidationError
	field string // dotted path in the arguments; "" for the arguments themselves
	node  map[string]any
	link  *link
}

// link is the innermost link of a keyed chain an error lies in.
type link struct {
	key  string // the field the chain is keyed on
	desc string // the link's description, "" when it has none
}

// explain turns the validator's error tree into Berth's sentences:
// jsonschema words each failed keyword for a schema's author ("missing
// property 'symbol'"), and says nothing of the if/then link it failed in.
func explain(tool string, doc any, args map[string]any, ve *jsonschema.ValidationError) string {
	var probs []problem
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		node, l := locate(doc, e.SchemaURL)
		probs = append(probs, problem{err: e, field: strings.Join(e.InstanceLocation, "."), node: node, link: l})
	}
	walk(ve)

	// A field a link refuses is not refused again by the top level.
	linkRefuses := map[string]bool{}
	for _, p := range probs {
		if _, ok := p.err.ErrorKind.(*kind.AdditionalProperties); ok && p.link != nil {
			linkRefuses[p.field] = true
		}
	}
	var msgs []string
	seen := map[string]bool{}
	for _, p := range probs {
		if _, ok := p.err.ErrorKind.(*kind.AdditionalProperties); ok && p.link == nil && linkRefuses[p.field] {
			continue
		}
		msg := sentence(tool, doc, args, p)
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

// sentence words one failed keyword.
func sentence(tool string, doc any, args map[string]any, p problem) string {
	subject := strconv.Quote(p.field)
	if p.field == "" {
		subject = "the arguments"
	}
	switch k := p.err.ErrorKind.(type) {
	case *kind.Required:
		if p.link != nil && p.field == "" {
			msg := fmt.Sprintf("%s needs %s", keyValue(args, p.link.key), fieldList(doc, p.node, k.Missing, p.link.desc == ""))
			if p.link.desc != "" {
				msg += ": " + p.link.desc
			}
			return msg
		}
		who := tool
		if p.field != "" {
			who = subject
		}
		return fmt.Sprintf("%s needs %s", who, fieldList(doc, p.node, k.Missing, true))
	case *kind.AdditionalProperties:
		who, other := tool, ""
		switch {
		case p.link != nil && p.field == "":
			who, other = keyValue(args, p.link.key), "other "
		case p.field != "":
			who = subject
		}
		var takes []string
		for name := range mapOf(p.node["properties"]) {
			if p.link == nil || name != p.link.key {
				takes = append(takes, strconv.Quote(name))
			}
		}
		sort.Strings(takes)
		only := "no " + other + "arguments"
		if len(takes) > 0 {
			only = "only " + strings.Join(takes, ", ")
		}
		extra := slices.Sorted(slices.Values(k.Properties))
		return fmt.Sprintf("%s does not take %s (it takes %s)", who, quoteAll(extra), only)
	case *kind.Type:
		return fmt.Sprintf("%s must be %s, not %s", subject, typeNames(k.Want), typeName(k.Got))
	case *kind.Enum:
		var want []string
		for _, v := range k.Want {
			want = append(want, display(v))
		}
		if len(want) == 1 {
			return fmt.Sprintf("%s must be %s (got %s)", subject, want[0], display(k.Got))
		}
		return fmt.Sprintf("%s must be one of %s (got %s)", subject, strings.Join(want, ", "), display(k.Got))
	case *kind.Const:
		return fmt.Sprintf("%s must be %s (got %s)", subject, display(k.Want), display(k.Got))
	case *kind.Minimum:
		return fmt.Sprintf("%s must be at least %s (got %s)", subject, k.Want.RatString(), k.Got.RatString())
	case *kind.Maximum:
		return fmt.Sprintf("%s must be at most %s (got %s)", subject, k.Want.RatString(), k.Got.RatString())
	case *kind.MinLength:
		if k.Want == 1 {
			return subject + " must not be empty"
		}
		return fmt.Sprintf("%s must have at least %d characters (got %d)", subject, k.Want, k.Got)
	case *kind.MaxLength:
		return fmt.Sprintf("%s must have at most %d characters (got %d)", subject, k.Want, k.Got)
	case *kind.Pattern:
		// The field's description says what the pattern asks, in words
		// (eval's "5-10 words saying what the cell does"); the regular
		// expression is the last resort.
		if d, _ := p.node["description"].(string); d != "" {
			return fmt.Sprintf("%s must be %s (got %s)", subject, strings.TrimSuffix(d, "."), display(k.Got))
		}
		return fmt.Sprintf("%s must match the pattern %s (got %s)", subject, k.Want, display(k.Got))
	case *kind.MinItems:
		return fmt.Sprintf("%s must have at least %d item(s) (got %d)", subject, k.Want, k.Got)
	case *kind.MaxItems:
		return fmt.Sprintf("%s must have at most %d item(s) (got %d)", subject, k.Want, k.Got)
	}
	msg := p.err.BasicOutput().Error.String()
	if p.field == "" {
		return msg
	}
	return fmt.Sprintf("field %s: %s", subject, msg)
}

// locate follows a schema location ("berth:///tools/lsp.json#/else/then")
// through the schema's text to the object it names, and finds the
// innermost keyed link on the way: a "then" whose "if" fixes a field's
// value. The link's description is the nearest one at or below its
// "then" on the way.
func locate(doc any, url string) (map[string]any, *link) {
	_, frag, _ := strings.Cut(url, "#")
	cur := doc
	var l *link
	var below []map[string]any // objects from the innermost link's then down
	for _, tok := range strings.Split(frag, "/")[1:] {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch c := cur.(type) {
		case map[string]any:
			if tok == "then" {
				if key := keyOf(c["if"]); key != "" {
					l, below = &link{key: key}, nil
				}
			}
			cur = c[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, nil
			}
			cur = c[i]
		default:
			return nil, nil
		}
		if m, ok := cur.(map[string]any); ok && l != nil {
			below = append(below, m)
		}
	}
	if l != nil {
		for i := len(below) - 1; i >= 0 && l.desc == ""; i-- {
			l.desc, _ = below[i]["description"].(string)
		}
	}
	node, _ := cur.(map[string]any)
	return node, l
}

// keyOf returns the field an if-schema fixes with const or enum, or "".
func keyOf(cond any) string {
	for name, s := range mapOf(mapOf(cond)["properties"]) {
		m := mapOf(s)
		if _, ok := m["const"]; ok {
			return name
		}
		if _, ok := m["enum"]; ok {
			return name
		}
	}
	return ""
}

// keyValue is what the arguments give for a chain's key, as the subject
// of a sentence: definition, launch.
func keyValue(args map[string]any, key string) string {
	if s, ok := args[key].(string); ok {
		return s
	}
	return fmt.Sprintf("%s %s", key, display(args[key]))
}

// fieldList names fields, quoted, in a list ending "and", each followed by
// its description (from node's properties, else the top level's) when
// described is set.
func fieldList(doc any, node map[string]any, names []string, described bool) string {
	var parts []string
	for _, n := range names {
		part := strconv.Quote(n)
		if described {
			if d := description(doc, node, n); d != "" {
				part += " (" + d + ")"
			}
		}
		parts = append(parts, part)
	}
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

func description(doc any, node map[string]any, name string) string {
	for _, m := range []map[string]any{node, mapOf(doc)} {
		if d, ok := mapOf(mapOf(m["properties"])[name])["description"].(string); ok && d != "" {
			return strings.TrimSuffix(d, ".")
		}
	}
	return ""
}

func mapOf(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

// display writes a JSON value as the arguments would spell it.
func display(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func typeNames(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = typeName(n)
	}
	return strings.Join(out, " or ")
}

// typeName is a JSON type with its article: "a string", "an integer".
func typeName(t string) string {
	switch t {
	case "null":
		return "null"
	case "integer", "object", "array":
		return "an " + t
	}
	return "a " + t
}
