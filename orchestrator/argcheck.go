package orchestrator

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode/utf8"

	"github.com/berth-dev/berth/internal/jsonscan"
)

// argSchema is the part of JSON Schema the tools' input schemas use,
// compiled to check a call's arguments in one pass over their bytes: the
// full validator (jsonschema) first decodes them into a tree, and its
// code is cold after a tool's wait, so it was a good part of what a call
// costs. It answers only "valid": anything it does not take on with
// certainty (a number with a fraction where bounds apply, an escape it
// leaves to encoding/json, a repeated key) and every invalid call goes
// through the full validator, which decides and words the errors. A
// schema with a keyword outside the set gets no argSchema at all.
type argSchema struct {
	kinds    kindSet // 0: any kind
	props    map[string]*argSchema
	required []string
	closed   bool // additionalProperties: false
	enum     []string
	items    *argSchema
	min, max *int64
	minLen   int // -1: none
	maxLen   int // -1: none
}

type kindSet uint8

const (
	kObject kindSet = 1 << iota
	kArray
	kString
	kInteger
	kNumber // includes integers
	kBoolean
	kNull
)

var kindNames = map[string]kindSet{"object": kObject, "array": kArray, "string": kString,
	"integer": kInteger, "number": kNumber, "boolean": kBoolean, "null": kNull}

// annotations are keywords that do not constrain a value.
var annotations = map[string]bool{"description": true, "title": true, "default": true, "examples": true, "$comment": true}

// QuickArgCheck says whether arguments for a tool with this input schema
// are checked in one pass over their bytes: it keeps to type, properties,
// required, additionalProperties (true or false), enum (of strings),
// items, minimum and maximum (integers), minLength and maxLength. Every
// built-in tool does (cmd/orchestrator's tests hold them to it); another
// schema works too, at the full validator's cost on every call.
func QuickArgCheck(schema json.RawMessage) bool { return compileArgSchema(schema) != nil }

// compileArgSchema compiles a schema's text; nil when it uses anything
// argSchema does not handle.
func compileArgSchema(raw []byte) *argSchema {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	return compileArg(v)
}

func compileArg(v any) *argSchema {
	m, ok := v.(map[string]any)
	if !ok {
		return nil // true, false: rare, left to the full validator
	}
	s := &argSchema{minLen: -1, maxLen: -1}
	for k, val := range m {
		ok := true
		switch k {
		case "type":
			s.kinds, ok = compileKinds(val)
		case "properties":
			props, isMap := val.(map[string]any)
			ok = isMap
			s.props = map[string]*argSchema{}
			for name, p := range props {
				if s.props[name] = compileArg(p); s.props[name] == nil {
					ok = false
				}
			}
		case "required":
			s.required, ok = stringList(val)
		case "additionalProperties":
			closed, isBool := val.(bool)
			s.closed, ok = !closed, isBool
		case "enum":
			s.enum, ok = stringList(val)
		case "items":
			s.items = compileArg(val)
			ok = s.items != nil
		case "minimum":
			s.min, ok = intOf(val)
		case "maximum":
			s.max, ok = intOf(val)
		case "minLength":
			var n *int64
			if n, ok = intOf(val); ok {
				s.minLen = int(*n)
			}
		case "maxLength":
			var n *int64
			if n, ok = intOf(val); ok {
				s.maxLen = int(*n)
			}
		default:
			ok = annotations[k]
		}
		if !ok {
			return nil
		}
	}
	if s.kinds&kInteger != 0 && s.kinds&kNumber != 0 {
		s.kinds &^= kInteger
	}
	return s
}

func compileKinds(v any) (kindSet, bool) {
	names := []any{v}
	if list, ok := v.([]any); ok {
		names = list
	}
	var ks kindSet
	for _, n := range names {
		s, _ := n.(string)
		k, ok := kindNames[s]
		if !ok {
			return 0, false
		}
		ks |= k
	}
	return ks, ks != 0
}

func stringList(v any) ([]string, bool) {
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, ok := x.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

func intOf(v any) (*int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return nil, false
	}
	i, err := n.Int64()
	if err != nil {
		return nil, false
	}
	return &i, true
}

// valid says args (a JSON object's text) certainly satisfy s.
func (s *argSchema) valid(args []byte) bool {
	p := jsonscan.New(args)
	return p.Peek() == '{' && s.value(p) && p.End()
}

// value checks the value at the scanner against s.
func (s *argSchema) value(p *jsonscan.Scanner) bool {
	switch p.Peek() {
	case '{':
		return s.enum == nil && s.allows(kObject) && s.object(p)
	case '[':
		if s.enum != nil || !s.allows(kArray) {
			return false
		}
		items := s.items
		return p.Array(func() bool {
			if items == nil {
				return p.Skip()
			}
			return items.value(p)
		})
	case '"':
		str, ok := p.String()
		if !ok || !s.allows(kString) {
			return false
		}
		if s.minLen >= 0 || s.maxLen >= 0 {
			n := utf8.RuneCountInString(str)
			if s.minLen >= 0 && n < s.minLen || s.maxLen >= 0 && n > s.maxLen {
				return false
			}
		}
		return s.enum == nil || slices.Contains(s.enum, str)
	case 't', 'f':
		var b bool
		return p.Bool(&b) && s.allows(kBoolean) && s.enum == nil
	case 'n':
		return p.Null() && s.allows(kNull) && s.enum == nil
	}
	if s.enum != nil {
		return false
	}
	if s.min == nil && s.max == nil && s.kinds&kInteger == 0 {
		_, _, ok := p.Number()
		return ok && s.allows(kNumber)
	}
	// Bounds or "integer": only a plain integer is judged here.
	n, ok := p.Int()
	return ok && (s.allows(kInteger) || s.allows(kNumber)) &&
		(s.min == nil || n >= *s.min) && (s.max == nil || n <= *s.max)
}

// allows says the schema's type admits the kind.
func (s *argSchema) allows(k kindSet) bool {
	return s.kinds == 0 || s.kinds&k != 0 || k == kInteger && s.kinds&kNumber != 0
}

func (s *argSchema) object(p *jsonscan.Scanner) bool {
	var seen []string
	ok := p.Object(func(key string) bool {
		seen = append(seen, key)
		if prop, ok := s.props[key]; ok {
			return prop.value(p)
		}
		return !s.closed && p.Skip()
	})
	if !ok {
		return false
	}
	for _, r := range s.required {
		if !slices.Contains(seen, r) {
			return false
		}
	}
	return true
}
