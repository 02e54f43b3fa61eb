package orchestrator

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// Schemas in the tools' style: lsp's, and one with every keyword
// argSchema handles.
var argSchemas = []string{
	`{"type":"object","additionalProperties":false,"required":["action"],"properties":{
		"action":{"type":"string","enum":["definition","references","status"],"description":"what"},
		"file":{"type":"string"},"line":{"type":"integer","minimum":1},
		"symbol":{"type":"string","minLength":1},"query":{"type":"string"}}}`,
	`{"type":"object","required":["op","n"],"properties":{
		"op":{"type":"string","enum":["a","é"]},
		"n":{"type":"integer","minimum":-2,"maximum":5},
		"x":{"type":"number"},
		"lines":{"type":"array","items":{"type":"integer","minimum":1}},
		"names":{"type":"array","items":{"type":"string","maxLength":3}},
		"flag":{"type":"boolean"},
		"any":{},
		"maybe":{"type":["string","null"]},
		"obj":{"type":"object","properties":{"k":{"type":"string"}},"additionalProperties":false}}}`,
	`{"type":"object","properties":{"mode":{"enum":["a","x"]},"multi":{"type":["string","object","array"],"enum":["x"]}}}`,
}

// argCases are arguments for argSchemas: valid and invalid in every way
// the keywords allow.
func argCases() []string {
	vals := []string{`"a"`, `1`, `0`, `-3`, `5`, `6`, `1.0`, `1e0`, `2.5`, `99999999999999999999`, `"x"`, `""`, `"é"`,
		`"abcd"`, `"\u0061"`, `"a\"b"`, `true`, `null`, `[]`, `[1,2]`, `[0]`, `["ab","abcd"]`, `{}`, `{"k":"v"}`, `{"k":1}`, `{"z":1}`}
	var out []string
	for _, key := range []string{"action", "file", "line", "symbol", "query", "op", "n", "x", "lines", "names", "flag", "any", "maybe", "obj", "mode", "multi", "other"} {
		for _, v := range vals {
			out = append(out,
				fmt.Sprintf(`{%q:%s}`, key, v),
				fmt.Sprintf(`{"action":"references",%q:%s}`, key, v),
				fmt.Sprintf(`{"op":"a","n":1,%q:%s}`, key, v))
		}
	}
	return append(out, `{}`, `{"action":"status"}`, `{"action":"status","action":"status"}`, `{"op":"é","n":5}`,
		` { "action" : "definition" , "line" : 3 } `, `{"action":"stat\u0075s"}`, `{"action":"status"} x`, `[]`, `{"action":`)
}

func TestArgSchemaAgreesWithTheValidator(t *testing.T) {
	for i, raw := range argSchemas {
		sch, err := compileSchema(fmt.Sprint("t", i), json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		if sch.quick == nil {
			t.Fatalf("schema %d: no quick check", i)
		}
		quick := 0
		for _, args := range argCases() {
			full := validateArgs(&inputSchema{full: sch.full}, json.RawMessage(args)) == ""
			fast := sch.quick.valid([]byte(args))
			if fast && !full {
				t.Errorf("schema %d: %s passed the quick check; the validator says %s", i, args, validateArgs(&inputSchema{full: sch.full}, json.RawMessage(args)))
			}
			if full && !fast && plainArgs(args) {
				t.Errorf("schema %d: %s is valid, but the quick check left it to the validator", i, args)
			}
			if fast {
				quick++
			}
		}
		if quick < 20 {
			t.Errorf("schema %d: only %d cases passed the quick check", i, quick)
		}
	}
}

// plainArgs says the quick check must decide args itself: no fraction,
// exponent, or huge number, and no repeated key.
func plainArgs(args string) bool {
	for _, s := range []string{"1.0", "1e0", "2.5", "99999999999999999999"} {
		if strings.Contains(args, s) {
			return false
		}
	}
	for _, key := range []string{`"action":`, `"op":`, `"n":`} {
		if strings.Count(args, key) > 1 {
			return false
		}
	}
	return true
}

func TestArgSchemaLeavesOtherKeywordsToTheValidator(t *testing.T) {
	for _, raw := range []string{
		`{"type":"object","properties":{"a":{"type":"string","pattern":"^a"}}}`,
		`{"type":"object","properties":{"a":{"oneOf":[{"type":"string"},{"type":"integer"}]}}}`,
		`{"type":"object","additionalProperties":{"type":"string"}}`,
		`{"type":"object","properties":{"a":{"enum":[1,2]}}}`,
		`{"type":"object","properties":{"a":{"type":"number","minimum":0.5}}}`,
		`{"$ref":"#/$defs/x","$defs":{"x":{"type":"object"}}}`,
		`{"type":"object","properties":{"a":true}}`,
		`{"type":"decimal"}`,
	} {
		if compileArgSchema([]byte(raw)) != nil {
			t.Errorf("%s: compiled to a quick check", raw)
		}
	}
}

// Whatever passes the quick check, the validator passes.
func FuzzArgSchema(f *testing.F) {
	for _, a := range argCases() {
		f.Add(uint8(0), a)
	}
	var schemas []*inputSchema
	for i, raw := range argSchemas {
		sch, err := compileSchema(fmt.Sprint("t", i), json.RawMessage(raw))
		if err != nil {
			f.Fatal(err)
		}
		schemas = append(schemas, sch)
	}
	f.Fuzz(func(t *testing.T, which uint8, args string) {
		sch := schemas[int(which)%len(schemas)]
		if sch.quick.valid([]byte(args)) {
			if msg := validateArgs(&inputSchema{full: sch.full}, json.RawMessage(args)); msg != "" {
				t.Fatalf("%s passed the quick check; the validator says %s", args, msg)
			}
		}
	})
}
